// Command kwokstages writes the Stage configuration that the local control
// plane passes to kwok with --config: the "fast" node and pod lifecycles
// that kwok publishes as embeddable packages (sigs.k8s.io/kwok/kustomize/stage),
// with node heartbeats through Leases. kwok exits with "no stages found"
// when it is started without stages.
//
// Usage: kwokstages OUTPUT.yaml
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kwokstages:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: kwokstages OUTPUT.yaml")
	}
	docs := []string{
		nodefast.DefaultNodeInit,
		nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		docs[i] = strings.TrimSpace(d) + "\n"
	}
	out := strings.Join(docs, "---\n")
	if err := os.WriteFile(args[0], []byte(out), 0o644); err != nil {
		return fmt.Errorf("write stages: %w", err)
	}
	return nil
}
