# Env images (included by the Makefile). `make build ENV=cpu`; build settings for mirrors and offline hosts:
#   make build ENV=cpu BASE_IMAGE=mlcbench-base/debian:bookworm WHEELHOUSE=~/.cache/mlcbench/wheelhouse
#   make build ENV=triton-2504 INDEX_URL=https://pypi.internal/simple CA_BUNDLE=/etc/ssl/certs/corp.pem
#   make build ENV=openxla PROFILE=cpu              (another build of the env's Dockerfile: env.toml's [profiles])
ENV ?=
PROFILE ?=
BASE_IMAGE ?=
INDEX_URL ?=
CA_BUNDLE ?=
WHEELHOUSE ?=

OPENXLA_WHEELHOUSE ?= $(or $(MLCBENCH_OPENXLA_WHEELHOUSE),$(HOME)/.cache/mlcbench/wheelhouse-openxla)

.PHONY: build envs docker-setup openxla-image

build: $(BIN)/mlcbench
	@test -n "$(ENV)" || { echo "usage: make build ENV=<name> (see: make envs)" >&2; exit 2; }
	$(BIN)/mlcbench build $(ENV) $(if $(PROFILE),--profile $(PROFILE)) $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) $(if $(INDEX_URL),--index-url $(INDEX_URL)) \
		$(if $(CA_BUNDLE),--ca-bundle $(CA_BUNDLE)) $(if $(WHEELHOUSE),--wheelhouse $(WHEELHOUSE))

envs: $(BIN)/mlcbench
	$(BIN)/mlcbench envs

# a Docker engine, a local Debian base image and the cpu env's wheelhouse, on a bare Debian 12 host (as root)
docker-setup:
	.ci/docker-setup.sh

# The openxla env's CPU build (torch 2.5 + torch_xla 2.5, a 6.5 GB image; ~5 min the first time, then found by its
# tag in seconds), which tests/e2e/test_openxla_image.py runs. Too slow for `make test`'s budget: .ci/run makes it first.
openxla-image: $(BIN)/mlcbench
	.ci/docker-setup.sh openxla
	$(BIN)/mlcbench build openxla --profile cpu --base-image mlcbench-base/debian:bookworm \
		--wheelhouse $(OPENXLA_WHEELHOUSE)
