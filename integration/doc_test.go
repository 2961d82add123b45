// Package integration_test holds the end-to-end tests of nodewright on the
// local stack (integration/harness): a real Kubernetes control plane with
// kwok nodes, and, as they land, the AWS stand-ins and the forwarder.
//
// The tests need the control-plane binaries (`make controlplane`); without
// them, or under -short, they skip. Run them with `make integration`.
package integration_test
