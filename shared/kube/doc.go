// Package kube is nodewright's Kubernetes adapter for the Lambdas: it reads,
// updates and deletes Nodes (registration, garbage collection), and taints,
// cordons, evicts and deletes pods for termination, following Karpenter's
// drain rules, and lists the VolumeAttachments termination waits for
// (karpenter-spec sections 5.1, 5.2 and 11.3 items 19, 21 and 23).
// Snapshot lists the objects a disruption evaluation reads, for the CLI's
// `rollout --live`.
// It is the only package under shared/ that imports client-go (STYLE import
// rule 4); use cases reach it through interfaces they declare.
//
// Every method takes a context first and returns errors wrapped as
// "verb object name: cause". Absent objects are reported with an error
// matching ErrNotFound (errors.Is), except where a method documents that
// absence is success (DeleteNode, DeletePod, Evict).
//
// RESTConfig builds a client configuration for an EKS API server reached
// with an IAM token (see shared/aws/ekstoken); New and NewFromClientset
// build a Client over a real or fake clientset. The pure helpers
// (DrainOrder, Drainable, Evictable, DoNotDisrupt) take the current time
// from their caller.
package kube
