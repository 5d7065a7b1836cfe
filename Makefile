# lockstep: a kube-scheduler extender for all-or-nothing gang scheduling.
#   make demo   a local control plane, simulated GPU nodes, the seed scenario, /debug/gangs
#   make test   vet, unit tests with -race, bounded fuzzing, then the end-to-end suite against real components
#   make soak   the end-to-end suite's randomized soak alone, longer: SOAK_ARGS picks seeds and size
#   make bench  verb latency, allocations and memory, then throughput through the real scheduler
#   make test-versions  the core end-to-end cases against every Kubernetes release lockstep claims
GO ?= go

.PHONY: all build test unit fuzz e2e e2e-release test-versions soak demo bench bench-dra bench-throughput bench-burst bench-packing control-plane scheduler-plugins vc-scheduler koord-scheduler training-operator volcano helm mpi-operator kueue arena tools vet fmt image clean

all: build

build:
	$(GO) build -o bin/extender ./cmd/extender
	$(GO) build -o bin/gpu-agent ./cmd/gpu-agent
	$(GO) build -o bin/kubectl-lockstep ./cmd/kubectl-lockstep

# The real etcd, kube-apiserver, kube-scheduler and kube-controller-manager, built once from the
# pinned modules under test/tools into bin/ (about 7 minutes the first time on 2 cores).
control-plane:
	bash hack/build-control-plane.sh

# The same three Kubernetes components of older releases, from test/tools/k8s-<minor> into
# bin/k8s-<minor> (about 6 minutes each the first time): 1.36 for `make test`'s second pass, 1.32,
# the oldest release the README claims, for `make test-versions` alone.
control-plane-%:
	bash hack/build-control-plane.sh $*

# scheduler-plugins' coscheduling scheduler, which `make bench` compares lockstep with, built once
# from test/tools/scheduler-plugins into bin/sp-scheduler (about 4 minutes the first time). Only the
# bench targets need it: `make test` does not build it.
scheduler-plugins:
	bash hack/build-scheduler-plugins.sh

# Volcano v1.10.0's scheduler, which `make bench` compares lockstep with, built once from
# test/tools/volcano (the controller-manager's module) into bin/vc-scheduler (about 2 minutes the
# first time, once the controller-manager is built). The bench runs the controller-manager's
# PodGroup controller beside it, as a Volcano install does.
vc-scheduler:
	bash hack/build-vc-scheduler.sh

# Koordinator v1.8.0's koord-scheduler, which `make bench` compares lockstep with, built once from
# test/tools/koordinator into bin/koord-scheduler (about 9 minutes the first time). Only the bench
# targets need these two: `make test` does not build them.
koord-scheduler:
	bash hack/build-koord-scheduler.sh

# The Kubeflow training-operator v1.8.1, built once from test/tools/training-operator into
# bin/training-operator (about 2 minutes the first time). The end-to-end suite runs it to check
# lockstep against the PodGroups and pods it makes.
training-operator:
	bash hack/build-training-operator.sh

# Volcano v1.10.0's controller-manager, built once from test/tools/volcano into
# bin/vc-controller-manager (about 3 minutes the first time). The end-to-end suite runs its job
# controller to check lockstep against the PodGroups and pods a vcjob makes.
volcano:
	bash hack/build-volcano.sh

# Helm v3.17.0, built once from test/tools/helm into bin/helm (about 3 minutes the first time).
# The end-to-end suite runs it to lint and render deploy/helm/lockstep and applies the result.
helm:
	bash hack/build-helm.sh

# The Kubeflow MPI operator v0.8.0, built once from test/tools/mpi-operator into bin/mpi-operator.
# The end-to-end suite runs it with both of its gang-scheduling modes. Its tools module pins the
# Kubernetes libraries Kueue's pins (a patch release apart from the operator's own), so after
# Kueue's build it compiles in well under a minute instead of about six.
mpi-operator: kueue
	bash hack/build-mpi-operator.sh

# Kueue v0.17.1's controller, built once from test/tools/kueue into bin/kueue. The end-to-end suite
# runs it to admit pod groups and Jobs by quota while lockstep places them.
kueue:
	bash hack/build-kueue.sh

# Arena v0.15.5's command line, built once from test/tools/arena into bin/arena, and the kubectl it
# shells out to (bin/arena-kubectl, from the control plane's Kubernetes module).
arena:
	bash hack/build-arena.sh

# Every tool the end-to-end suite runs, two builds at a time: each go build keeps the cores busy
# while it compiles, but downloads and links leave them idle, and the other build fills that time.
# A fresh machine builds them all in about 33 minutes on 2 cores (47 minutes of CPU, Kueue the
# largest at a quarter of it); later runs reuse bin/.
TOOLS = control-plane control-plane-1.36 kueue arena training-operator volcano helm mpi-operator
tools:
	$(MAKE) -j2 $(TOOLS)

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/e2e)

# Every fuzz target for FUZZTIME each, one after another (go test fuzzes one target per run).
# `unit` already runs their seeds as tests; this adds a little mutation beyond them on every
# `make test`, bounded to about two minutes on 2 cores. The first run also compiles every
# dependency again with fuzzing instrumentation (about 4 minutes, once). Hunt longer with e.g.
# `make fuzz FUZZTIME=10m`. The default -fuzzminimizetime of 60s would spend a short run
# shrinking the first new input it finds instead of fuzzing.
FUZZTIME ?= 10s
FUZZMINIMIZETIME ?= 1s
# package:target; hack/fuzz.sh says why it runs each one rather than go test alone.
FUZZ_TARGETS = extender:FuzzExtenderArgs extender:FuzzExtenderArgsStdlib extender:FuzzNodeNameList \
	extender:FuzzHostPriorities extender:FuzzFilterResult extender:FuzzHandler \
	dialect:FuzzPodMarkers dialect:FuzzPodGroup dialect:FuzzWorkloadGroup dialect:FuzzQueue gpu:FuzzParseAnnotation fabric:FuzzParse
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) bash hack/fuzz.sh $${t%%:*} $${t#*:} || exit 1; \
	done

# The end-to-end suite against the pinned release, then its core cases and Kubernetes' own
# PodGroup's v1alpha2 cases against 1.36 (cluster.BinDirEnv picks the control plane).
e2e: tools
	$(GO) test -race -count=1 -timeout 30m -v ./test/e2e/
	$(MAKE) e2e-release RELEASE=1.36 CASES='$(CORE_CASES)|$(NATIVE_CASES)'

# What runs against every release: the seed pair, members created one by one (which lean on how
# the release's scheduler requeues a pod lockstep turned away), priority, a restart mid-gang and
# mutual TLS; and on the releases that serve Kubernetes' PodGroup API, its cases.
CORE_CASES = TestGangThatDoesNotFitBindsNothing|TestMembersCreatedOneByOneAreRecalled|TestGangPreemptsLowerPriorityPodsWhole|TestHigherPriorityGangTakesLowerReservation|TestRestartMidGangLeavesNoPartialGang|TestSchedulerCallsLockstepOverMutualTLS
NATIVE_CASES = TestKubernetesPodGroup|TestKubernetesPodGroupSeedPair|TestIndexedJobGetsAPodGroup|TestKubernetesExamples|TestBesideKubeSchedulersWorkloadScheduling
e2e-release: control-plane control-plane-$(RELEASE)
	LOCKSTEP_KUBE_BIN=bin/k8s-$(RELEASE) $(GO) test -race -count=1 -timeout 20m -v -run '^($(CASES))$$' ./test/e2e/

# The range docs/operating.md claims, proven: the core cases against the oldest release claimed
# (1.32), 1.36 and the pinned release, each control plane built from its module; prints the table
# of record. 1.29, which does not pass (docs/operating.md says why), stays buildable to show it:
# make test-versions VERSIONS="1.29 1.32 1.36".
VERSIONS = 1.32 1.36
test-versions: control-plane $(addprefix control-plane-,$(VERSIONS))
	GO=$(GO) CORE_CASES='$(CORE_CASES)' NATIVE_CASES='$(NATIVE_CASES)' bash hack/test-versions.sh $(VERSIONS)

# The soak runs in `make test` with one fixed seed and a small budget (test/e2e/soak_test.go);
# this is the longer run. A failure prints the line that replays its scenario alone.
SOAK_ARGS ?= -soak.seed=1 -soak.seeds=3 -soak.scenarios=70 -soak.parallel=3
soak: control-plane
	$(GO) test -race -count=1 -timeout 120m -v -run 'TestSoak' ./test/e2e/ -args $(SOAK_ARGS)

test: vet control-plane unit fuzz e2e

demo: control-plane
	@echo "==> Compiling and starting the demo (the first time: about a minute)"
	$(GO) run ./test/cmd/demo

# The schedulers the throughput bench compares lockstep with, and what runs beside them.
BENCH_TOOLS = control-plane scheduler-plugins volcano vc-scheduler koord-scheduler

# Throughput runs twice: with the schedulers as shipped (kube-scheduler's client at its default
# 50 requests/s, which caps the scheduler alone), then with every scheduler's client limit lifted,
# where each is bound by CPU alone; that run also measures the floor, kube-scheduler with an
# extender that decides nothing (test/cmd/floorextender), the nearest any extender can come to the
# scheduler alone. Then the openb trace workload: mixed gangs arriving over time, until the first
# gang that cannot be placed.
LIFTED_MODES = stock,floor,lockstep,coscheduling,volcano,koordinator
bench: $(BENCH_TOOLS)
	$(GO) run ./test/cmd/verbbench
	$(GO) run ./test/cmd/queuebench
	$(GO) run ./test/cmd/throughput
	$(GO) run ./test/cmd/throughput -scheduler-qps 1000 -modes $(LIFTED_MODES)
	$(GO) run ./test/cmd/throughput -workload trace
	$(GO) run ./test/cmd/throughput $(BURST_ARGS)

# Throughput and gang latency through the real kube-scheduler: alone, with lockstep,
# scheduler-plugins' coscheduling, Volcano's scheduler and koord-scheduler.
# Flags: make bench-throughput ARGS="-nodes 100 -ordinary 400 -gangs 25" (or ARGS="-workload trace")
bench-throughput: $(BENCH_TOOLS)
	$(GO) run ./test/cmd/throughput $(ARGS)

# A burst of gangs (250 x 8, created before the scheduler starts, nothing else) through lockstep
# and Volcano's scheduler on one control plane (docs/concepts.md#a-burst-of-gangs).
# To measure a change: make bench-burst ARGS="-baseline HEAD~1" also runs lockstep built at that
# revision right after this tree's, and compares the two.
BURST_ARGS = -modes lockstep,volcano -ordinary 0 -idle-samples 0
bench-burst: $(BENCH_TOOLS)
	$(GO) run ./test/cmd/throughput $(BURST_ARGS) $(ARGS)

# The verb bench twice in one run: device-plugin GPUs, then the same nodes' GPUs published as
# DRA devices (a ResourceSlice of NVIDIA's driver per node), with the second's figures as ratios
# of the first's (docs/performance.md, "GPUs from DRA").
bench-dra: control-plane
	$(GO) run ./test/cmd/verbbench -dra $(ARGS)

bench-packing:
	$(GO) run ./test/cmd/packing

image:
	docker build -t ghcr.io/lockstep-sched/lockstep:latest .

clean:
	rm -rf bin/
