# lockstep image: the scheduler-extender webhook (/extender, the entrypoint), /gpu-agent and
# /kubectl-lockstep (the kubectl plugin, for copying out: docs/kubectl-plugin.md).
#   docker build -t ghcr.io/lockstep-sched/lockstep:latest .
# Cross-building (docker buildx build --platform linux/arm64 ...) compiles natively for the target.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
# Dependencies first, so that source edits do not re-download modules.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/extender ./cmd/gpu-agent ./cmd/kubectl-lockstep

# The binaries are static, but the gpu-agent runs the nvidia-smi that the NVIDIA container runtime
# mounts from the host, which is linked against glibc: hence distroless/base rather than static.
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/extender /out/gpu-agent /out/kubectl-lockstep /
USER 65532:65532
ENTRYPOINT ["/extender"]
