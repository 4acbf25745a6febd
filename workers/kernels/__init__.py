"""mlcbench's own hand-written Triton kernels: what the handtuned_decode reference row injects into the compiled decode
step. Each needs Triton and a CUDA GPU, so each is imported only by a job that turns it on."""
