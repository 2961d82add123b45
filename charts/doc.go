// Package charts holds the tests of the Helm chart charts/nodewright: it
// renders and lints the chart with Helm's own Go library, compares what it
// renders with the kustomize base (infra/kube, which includes
// forwarder/deploy), and has a real kube-apiserver accept it. It is a Go
// module of its own so that the runtime module does not carry Helm.
package charts
