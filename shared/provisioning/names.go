package provisioning

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Annotations Provision writes on the NodeClaims it creates. They travel to
// the Node at registration (NodeClaim annotations are synced), so an operator
// can trace a node back to the batch that asked for it.
const (
	// AnnotationBatchID names the pod batch a NodeClaim was planned for.
	AnnotationBatchID = "nodewright.dev/batch-id"
	// AnnotationBatchIndex is the NodeClaim's 0-based position among the
	// batch's new NodeClaims.
	AnnotationBatchIndex = "nodewright.dev/batch-index"
)

// claimSuffixLen is the length of the hash suffix of a NodeClaim name: 10
// base32 characters, 50 bits, so two batches' names collide with
// negligible probability (Karpenter uses 5 random characters).
const claimSuffixLen = 10

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ClaimName returns the name of the index-th new NodeClaim of batch batchID
// for NodePool nodePool: "<nodePool>-<10 characters of [a-z2-7]>", the
// characters hashing the batch ID and the index. The same arguments always
// give the same name, so a retried Provision writes the same names and its
// create-only writes detect the first attempt's NodeClaims. The result is a
// valid Kubernetes object name whenever nodePool is (NodePool names are at
// most 63 characters, so names stay within EC2's 256-character tag values).
func ClaimName(nodePool, batchID string, index int) string {
	sum := sha256.Sum256([]byte("nodewright/nodeclaim/" + batchID + "/" + strconv.Itoa(index)))
	return nodePool + "-" + lowerBase32.EncodeToString(sum[:])[:claimSuffixLen]
}

// claimUID returns the UID a NodeClaim named name gets when it is created at
// now, in UUID form. A NodeClaim keeps its UID for life, so every launch of
// it carries the same CreateFleet ClientToken; a NodeClaim created again
// under the same name (after its first incarnation was deleted, having
// launched nothing) gets a new UID, hence a fresh token.
func claimUID(name string, now time.Time) types.UID {
	sum := sha256.Sum256([]byte("nodewright/nodeclaim-uid/" + name + "/" + strconv.FormatInt(now.UnixNano(), 10)))
	h := hex.EncodeToString(sum[:16])
	// Version 4 layout (RFC 9562 section 5.4): the digest stands in for
	// the random bits.
	b := []byte(h)
	b[12] = '4'
	b[16] = "89ab"[strings.IndexByte("0123456789abcdef", b[16])%4]
	h = string(b)
	return types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}
