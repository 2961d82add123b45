// Package scheduling is nodewright's solver: it places pending pods onto
// existing nodes, in-flight NodeClaims or new NodeClaims, following
// Karpenter's scheduling semantics, and sizes new NodeClaims by cost.
package scheduling
