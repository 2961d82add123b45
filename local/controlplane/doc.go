// Package controlplane runs a real Kubernetes control plane on the loopback
// interface for the local stack and the end-to-end tests: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, and kwok standing
// in for the kubelets of Nodes that carry the annotation
// ManagedNodeAnnotation=ManagedNodeValue.
//
// The binaries are not built here: `make controlplane` builds them from the
// separate Go module in local/tools (k8s.io/kubernetes v1.37.2, etcd v3.7.0,
// kwok v0.8.0) into .cache/bin, together with kwok-stages.yaml, kwok's
// "fast" node and pod lifecycles. This package starts those files as child
// processes; the root module never compiles k8s.io/kubernetes.
//
// # State
//
// Everything a cluster writes lives under Options.Dir:
//
//	.nodewright-controlplane  marker: Start and StopDir only clean a directory holding it
//	pids                      "<component> <pid>" per started process, appended as each starts
//	pki/                      CA, serving certificate (127.0.0.1, localhost), service-account key pair
//	tokens.csv                static bearer tokens (kube-apiserver --token-auth-file)
//	kubeconfig                admin kubeconfig (group system:masters)
//	kubeconfigs/              one kubeconfig per component
//	etcd/                     etcd data
//	logs/<component>.log      stdout and stderr of each process
//
// Every listener binds 127.0.0.1, on ports picked free unless Options.Ports
// fixes them. Each process runs in its own process group; Stop and StopDir
// signal the groups by the recorded process IDs only (never by name).
package controlplane
