# berth's container image: the reconciler (berth reconcile, status, plan,
# doctor) as a static binary on a distroless base with CA certificates.
#
#   make image IMAGE=registry.example.com/berth:v1   # docker build -t IMAGE .
#
# The binary is built by `make static`, the same step make e2e runs and
# the deploy test (TestRealDeployReconcilerJob) registers on a real Nomad.
# It has no cgo, so `berth agent`, which reads GPUs through NVML, is not in
# it: the agent runs on the GPU nodes' hosts (berth-agent.nomad.hcl).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make static STATIC=/out/berth

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/berth /usr/local/bin/berth
USER nonroot
EXPOSE 4680
ENTRYPOINT ["/usr/local/bin/berth"]
CMD ["--help"]
