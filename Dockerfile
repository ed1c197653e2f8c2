# berth's container image: the reconciler (berth reconcile, status, plan,
# doctor) as a static binary on an empty base.
#
#   make image IMAGE=registry.example.com/berth:v1   # docker build -t IMAGE .
#
# make dist builds the same image without docker (internal/dist, as an
# image tarball): the same files, internal/dist/rootfs (the nonroot user,
# 65532) and berth at /usr/local/bin/berth, the same user, port and
# entrypoint. berth carries its own CA roots for where the system has
# none (golang.org/x/crypto/x509roots/fallback), so no certificate
# bundle is needed. It has no cgo, so `berth agent`, which reads GPUs
# through NVML, is not in it: the agent runs on the GPU nodes' hosts
# (berth-agent.nomad.hcl).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make static STATIC=/out/berth && mkdir -p /out/tmp && chmod 1777 /out/tmp

FROM scratch
COPY internal/dist/rootfs/ /
COPY --from=build /out/tmp /tmp
COPY --from=build /out/berth /usr/local/bin/berth
USER 65532:65532
WORKDIR /
ENV PATH=/usr/local/bin:/usr/bin:/bin
EXPOSE 4680
ENTRYPOINT ["/usr/local/bin/berth"]
CMD ["--help"]
