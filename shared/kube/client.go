package kube

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// ErrNotFound (v1.ErrNotFound) matches (errors.Is) the error returned for
// a Node or pod that does not exist.
var ErrNotFound = v1.ErrNotFound

// ErrConflict matches the error UpdateNode (and the methods built on it)
// returns when the Node kept changing under it for every attempt; it
// matches v1.ErrConflict too.
var ErrConflict = fmt.Errorf("object kept changing: %w", v1.ErrConflict)

// ErrMultipleNodes matches the error NodeByProviderID returns when more
// than one Node carries the providerID.
var ErrMultipleNodes = errors.New("several nodes have the providerID")

// Retry and paging defaults.
const (
	// UpdateAttempts is how many read-mutate-write rounds UpdateNode makes
	// before giving up with ErrConflict.
	UpdateAttempts = 5
	// ListPageSize is the number of objects asked for per list request
	// (ListOptions.Limit).
	ListPageSize = 500
	// listRestarts bounds how often a paged list restarts after its
	// continue token expired (HTTP 410).
	listRestarts = 3
)

// Client is a Kubernetes client for the operations nodewright's Lambdas
// perform. It holds no cache and is safe for concurrent use.
type Client struct {
	cs kubernetes.Interface
	// backoff returns the pause before retry attempt n (n >= 1).
	backoff func(n int) time.Duration
}

// New returns a Client for the API server cfg describes (see RESTConfig).
// It fails only when cfg is nil or cannot build a clientset (bad host, bad
// TLS material); it makes no request.
func New(cfg *rest.Config) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("kube client: nil rest config")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	return NewFromClientset(cs), nil
}

// NewFromClientset returns a Client over cs (a real clientset, or
// k8s.io/client-go/kubernetes/fake in tests).
func NewFromClientset(cs kubernetes.Interface) *Client {
	return &Client{cs: cs, backoff: jitteredBackoff}
}

// jitteredBackoff is 25 ms doubled per attempt, capped at 400 ms, then
// scaled by a random factor in [0.5, 1.5) so that writers that conflicted
// once do not collide again in step.
func jitteredBackoff(n int) time.Duration {
	d := 25 * time.Millisecond << min(n-1, 4)
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// listAll pages through a list with ListPageSize items per request. When
// the continue token expires (410 Gone, the list took longer than the
// server keeps a snapshot), it starts again from the first page, at most
// listRestarts times, so the result is always one consistent snapshot.
func listAll[T any](ctx context.Context, opts metav1.ListOptions, page func(context.Context, metav1.ListOptions) ([]T, string, error)) ([]T, error) {
	var lastErr error
	for range listRestarts + 1 {
		var all []T
		o := opts
		o.Limit = ListPageSize
		o.Continue = ""
		for {
			items, next, err := page(ctx, o)
			if apierrors.IsResourceExpired(err) {
				lastErr = err
				all = nil
				break
			}
			if err != nil {
				return nil, err
			}
			all = append(all, items...)
			if next == "" {
				return all, nil
			}
			o.Continue = next
		}
	}
	return nil, fmt.Errorf("list kept expiring after %d restarts: %w", listRestarts, lastErr)
}
