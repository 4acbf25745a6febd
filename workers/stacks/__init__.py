"""Helpers shared by the workflows of one stack (ONNX export, TensorRT settings)."""
