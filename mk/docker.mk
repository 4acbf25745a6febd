# Env images (included by the Makefile). `make build ENV=cpu`; build settings for mirrors and offline hosts:
#   make build ENV=cpu BASE_IMAGE=mlcbench-base/debian:bookworm WHEELHOUSE=~/.cache/mlcbench/wheelhouse
#   make build ENV=triton-2504 INDEX_URL=https://pypi.internal/simple CA_BUNDLE=/etc/ssl/certs/corp.pem
ENV ?=
BASE_IMAGE ?=
INDEX_URL ?=
CA_BUNDLE ?=
WHEELHOUSE ?=

.PHONY: build envs docker-setup

build: $(BIN)/mlcbench
	@test -n "$(ENV)" || { echo "usage: make build ENV=<name> (see: make envs)" >&2; exit 2; }
	$(BIN)/mlcbench build $(ENV) $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) $(if $(INDEX_URL),--index-url $(INDEX_URL)) \
		$(if $(CA_BUNDLE),--ca-bundle $(CA_BUNDLE)) $(if $(WHEELHOUSE),--wheelhouse $(WHEELHOUSE))

envs: $(BIN)/mlcbench
	$(BIN)/mlcbench envs

# a Docker engine, a local Debian base image and the cpu env's wheelhouse, on a bare Debian 12 host (as root)
docker-setup:
	.ci/docker-setup.sh
