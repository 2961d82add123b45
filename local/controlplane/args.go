package controlplane

import (
	"path/filepath"
	"strconv"
)

// The flags below are the upstream binaries' own (etcd v3.7, Kubernetes
// v1.37, kwok v0.8); every listener is bound to 127.0.0.1.

func loopbackURL(scheme string, port int) string {
	return scheme + "://127.0.0.1:" + strconv.Itoa(port)
}

// etcdArgs runs a single-member etcd with its data under dir/etcd. fsync is
// off: the data is thrown away with the cluster.
func etcdArgs(dir string, p Ports) []string {
	client, peer := loopbackURL("http", p.EtcdClient), loopbackURL("http", p.EtcdPeer)
	return []string{
		"--name=local",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=local=" + peer,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

// apiServerArgs serves the Kubernetes API with RBAC, the default admission
// plugins, static-token authentication and service-account tokens signed
// by the cluster's key. The apiextensions API (CRDs) is part of
// kube-apiserver and on by default. The "kubernetes" Service gets no
// endpoints (loopback addresses are not valid endpoints).
func apiServerArgs(dir string, p Ports, k pki, tokenFile string) []string {
	return []string{
		"--etcd-servers=" + loopbackURL("http", p.EtcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.APIServer),
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--tls-cert-file=" + k.ServingCert,
		"--tls-private-key-file=" + k.ServingKey,
		"--client-ca-file=" + k.CACert,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + k.SAPub,
		"--service-account-signing-key-file=" + k.SAKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	}
}

// controllerManagerArgs runs every default controller (node lifecycle,
// which lifts the not-ready taint of new Nodes once kwok reports them
// Ready; ReplicaSets and Deployments; service-account and token
// controllers; garbage collection; ...), each with its own service-account
// credentials.
func controllerManagerArgs(kubeconfig string, p Ports, k pki) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authentication-skip-lookup=true",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.ControllerManager),
		"--tls-cert-file=" + k.ServingCert,
		"--tls-private-key-file=" + k.ServingKey,
		"--service-account-private-key-file=" + k.SAKey,
		"--root-ca-file=" + k.CACert,
		"--use-service-account-credentials=true",
		"--cluster-name=nodewright-local",
		"--leader-elect=false",
		"--profiling=false",
	}
}

// schedulerArgs runs the default scheduler profile. As for the controller
// manager, requests to its own /healthz are authenticated by token review
// only (--authentication-skip-lookup: the API server has no request-header
// CA for it to look up).
func schedulerArgs(kubeconfig string, p Ports, k pki) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authentication-skip-lookup=true",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.Scheduler),
		"--tls-cert-file=" + k.ServingCert,
		"--tls-private-key-file=" + k.ServingKey,
		"--leader-elect=false",
		"--profiling=false",
	}
}

// kwokArgs makes kwok the kubelet of Nodes annotated
// ManagedNodeAnnotation=ManagedNodeValue, with the stages of stagesFile
// (Nodes become Ready and renew Leases; Pods bound to them run) and Pod IPs
// from 10.244.0.0/16.
func kwokArgs(kubeconfig, stagesFile string, p Ports) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + stagesFile,
		"--manage-nodes-with-annotation-selector=" + ManagedNodeAnnotation + "=" + ManagedNodeValue,
		"--server-address=127.0.0.1:" + strconv.Itoa(p.Kwok),
		"--cidr=10.244.0.0/16",
		"--node-lease-duration-seconds=40",
	}
}
