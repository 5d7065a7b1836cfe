# lockstep: a kube-scheduler extender for all-or-nothing gang scheduling.
#   make demo   a local control plane, simulated GPU nodes, the seed scenario, /debug/gangs
#   make test   unit tests with -race, then the end-to-end suite against real components
#   make bench  verb latency, allocations and memory, as a table
GO ?= go

.PHONY: all build test unit e2e demo bench bench-packing control-plane vet fmt image clean

all: build

build:
	$(GO) build -o bin/extender ./cmd/extender
	$(GO) build -o bin/gpu-agent ./cmd/gpu-agent

# The real etcd, kube-apiserver and kube-scheduler, built once from the pinned modules under
# test/tools into bin/ (about 5 minutes the first time on 2 cores).
control-plane:
	bash hack/build-control-plane.sh

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/e2e)

e2e: control-plane
	$(GO) test -race -count=1 -timeout 30m -v ./test/e2e/

test: vet control-plane unit e2e

demo: control-plane
	$(GO) run ./test/demo

bench: control-plane
	$(GO) run ./test/verbbench

bench-packing:
	$(GO) run ./test/packing

image:
	docker build -t ghcr.io/lockstep-sched/lockstep:latest .

clean:
	rm -rf bin/
