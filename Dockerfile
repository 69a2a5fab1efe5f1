# lockd image. No image can be pulled here, so there is no builder stage:
# build the static binary on the host first (`make docker` does both):
#
#   CGO_ENABLED=0 go build -trimpath -o bin/lockd ./cmd/lockd
#   docker build -t lockd:dev .
FROM scratch

# The binary to copy. The jepsen suite's image, lockd:faults, copies the
# build made for it instead (make jepsen-image): test-only, never deploy it.
ARG LOCKD_BIN=bin/lockd
COPY ${LOCKD_BIN} /lockd

# 7001 HTTP API, 7101 raft (TCP), 7201 gossip (TCP and UDP).
EXPOSE 7001 7101 7201 7201/udp

# Raft log, stable store and snapshots. TMPDIR too, so that a bare
# `docker run -p 127.0.0.1:7001:7001 lockd:dev` (--dev) has somewhere to write.
VOLUME /data
ENV TMPDIR=/data

# There is no shell or curl in a scratch image: the binary checks itself
# (GET /v1/status on 127.0.0.1:7001; healthy once the node knows a leader).
HEALTHCHECK --interval=5s --timeout=3s --start-period=15s --retries=3 \
    CMD ["/lockd", "health", "--quiet"]

ENTRYPOINT ["/lockd"]
# A bare `docker run -p 127.0.0.1:7001:7001 lockd:dev` is a plaintext dev
# node: inside the container it must listen on 0.0.0.0, which lockd only
# does without TLS when told --insecure. Publish it on the host's loopback
# only; docker-compose.yml runs the secure cluster.
CMD ["--dev", "--http-addr", "0.0.0.0:7001", "--insecure"]
