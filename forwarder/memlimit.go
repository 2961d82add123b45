package main

import (
	"fmt"
	"strconv"
	"strings"
)

// cgroup files holding the container's memory limit: cgroup v2's
// memory.max ("max" when unlimited), else cgroup v1's
// memory.limit_in_bytes (a value near 2^63 when unlimited).
const (
	cgroupV2MemoryMax = "/sys/fs/cgroup/memory.max"
	cgroupV1MemoryMax = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// memoryLimitShare is the share of the container's memory request (or limit) the Go
// runtime's soft limit (GOMEMLIMIT) is set to: the collector works harder
// as the heap nears it, and the rest is headroom for what the runtime
// does not count (the binary's text, the kernel's accounting of the
// process) before the kernel kills the container at the limit.
const memoryLimitShare = 0.9

// memoryOutsideLimit is the least room left beside the soft limit for what
// it does not count: the forwarder's resident set stood 26 MiB above its
// GOMEMLIMIT at 1,000 nodes (docs/cost.md, "The forwarder's footprint"),
// more than the 10% share leaves of a small request (26 MiB of 256Mi).
const memoryOutsideLimit = 32 << 20

// memoryRequestEnv carries the container's memory request in bytes
// (deploy/: the Downward API's resourceFieldRef requests.memory).
const memoryRequestEnv = "MEMORY_REQUEST"

// goMemoryLimit returns the soft memory limit, in bytes, the forwarder
// sets when GOMEMLIMIT is not set, and where it read the base of it (the
// base, see limitOf): memoryLimitShare of the container's memory request (memoryRequestEnv),
// so that the collector keeps the heap within what the pod is sized on
// (Fargate picks its size from the requests) while the limit above it
// stays headroom for a larger cluster; without a request,
// memoryLimitShare of the container's cgroup memory limit. 0 with
// neither, an unreadable cgroup or GOMEMLIMIT set (the runtime applied it
// already). An unparsable request or cgroup file is an error naming it.
func goMemoryLimit(getenv func(string) string, readFile func(string) ([]byte, error)) (int64, string, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, "", nil
	}
	if v := strings.TrimSpace(getenv(memoryRequestEnv)); v != "" && v != "0" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, "", fmt.Errorf("%s: %q is not a byte count", memoryRequestEnv, v)
		}
		return limitOf(n), memoryRequestEnv, nil
	}
	for _, path := range []string{cgroupV2MemoryMax, cgroupV1MemoryMax} {
		data, err := readFile(path)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(data))
		if v == "max" {
			return 0, "", nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, "", fmt.Errorf("%s: %q is not a byte count or max", path, v)
		}
		if n >= 1<<62 { // cgroup v1's unlimited
			return 0, "", nil
		}
		return limitOf(n), path, nil
	}
	return 0, "", nil
}

// limitOf is the soft limit for a base of n bytes: memoryLimitShare of it,
// or memoryOutsideLimit below it when that is lower (for a base of more
// than twice that room: 224 MiB for a 256Mi request, 460.8 MiB for 512Mi).
func limitOf(n int64) int64 {
	share := int64(float64(n) * memoryLimitShare)
	if n > 2*memoryOutsideLimit && n-memoryOutsideLimit < share {
		return n - memoryOutsideLimit
	}
	return share
}
