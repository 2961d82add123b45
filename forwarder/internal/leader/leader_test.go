package leader_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/forwarder/internal/leader"
)

// poster stands in for the posting loop: it counts a post every second for
// as long as its context lives, per replica.
type poster struct {
	mu    sync.Mutex
	posts map[string]int
	live  map[string]bool
	// overlap is set if two replicas were ever posting at once.
	overlap bool
}

func newPoster() *poster { return &poster{posts: map[string]int{}, live: map[string]bool{}} }

func (p *poster) loop(identity string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		p.mu.Lock()
		for other, on := range p.live {
			if on && other != identity {
				p.overlap = true
			}
		}
		p.live[identity] = true
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.live[identity] = false
			p.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
				p.mu.Lock()
				p.posts[identity]++
				p.mu.Unlock()
			}
		}
	}
}

func (p *poster) snapshot() (map[string]int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.posts {
		out[k] = v
	}
	return out, p.overlap
}

// lease is the Lease the manifests create, so the forwarder never needs the
// create verb.
func lease() *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "nodewright", Name: "nodewright-forwarder"}}
}

func config(identity string) leader.Config {
	return leader.Config{Namespace: "nodewright", Name: "nodewright-forwarder", Identity: identity}
}

func TestOnlyTheLeaderPosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(lease())
		p := newPoster()
		ctxA, stopA := context.WithCancel(t.Context())
		ctxB, stopB := context.WithCancel(t.Context())
		defer stopB()
		errs := make(chan error, 2)
		go func() { errs <- leader.Run(ctxA, client, config("a"), p.loop("a")) }()
		time.Sleep(100 * time.Millisecond) // a campaigns first
		go func() { errs <- leader.Run(ctxB, client, config("b"), p.loop("b")) }()

		time.Sleep(time.Minute)
		synctest.Wait()
		posts, overlap := p.snapshot()
		if posts["a"] < 55 || posts["b"] != 0 || overlap {
			t.Fatalf("after a minute: posts %v, overlap %v; want only a posting", posts, overlap)
		}

		// a shuts down: it stops posting, releases the lease, and b takes
		// over within one retry period.
		stopA()
		if err := <-errs; err != nil {
			t.Fatalf("Run(a) after shutdown = %v, want nil", err)
		}
		before, _ := p.snapshot()
		time.Sleep(leader.DefaultRetryPeriod * 2)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		after, overlap := p.snapshot()
		if after["a"] != before["a"] {
			t.Errorf("a posted after shutting down: %d -> %d", before["a"], after["a"])
		}
		if after["b"] < 8 || overlap {
			t.Errorf("after a's shutdown: posts %v, overlap %v; want b posting alone", after, overlap)
		}
		stopB()
		if err := <-errs; err != nil {
			t.Fatalf("Run(b) after shutdown = %v, want nil", err)
		}
	})
}

func TestLeaderNeverCreatesTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(lease())
		ctx, stop := context.WithCancel(t.Context())
		started := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- leader.Run(ctx, client, config("a"), func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				return nil
			})
		}()
		<-started
		time.Sleep(30 * time.Second) // a few renewals
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		verbs := map[string]bool{}
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "leases" {
				verbs[a.GetVerb()] = true
			}
		}
		if diff := cmp.Diff(map[string]bool{"get": true, "update": true}, verbs); diff != "" {
			t.Errorf("verbs used on leases (the Role grants get and update) mismatch (-want +got):\n%s", diff)
		}
		got, err := client.CoordinationV1().Leases("nodewright").Get(t.Context(), "nodewright-forwarder", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "" {
			t.Errorf("holder after shutdown = %v, want released (empty)", got.Spec.HolderIdentity)
		}
	})
}

func TestLeadershipLostStopsTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(lease())
		var mu sync.Mutex
		failing := false
		client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				return true, nil, errors.New("apiserver unreachable")
			}
			return false, nil, nil
		})
		p := newPoster()
		done := make(chan error, 1)
		go func() { done <- leader.Run(t.Context(), client, config("a"), p.loop("a")) }()
		time.Sleep(5 * time.Second)
		mu.Lock()
		failing = true
		mu.Unlock()
		err := <-done
		if !errors.Is(err, leader.ErrLeadershipLost) {
			t.Fatalf("Run() = %v, want ErrLeadershipLost", err)
		}
		posts, _ := p.snapshot()
		// Renewal stops RenewDeadline after the last success; the loop
		// must have stopped by then, before the lease (15 s) expires.
		if posts["a"] < 4 {
			t.Errorf("posts = %d, want the loop to have run while leading", posts["a"])
		}
		if posts["a"] > 5+int(leader.DefaultRenewDeadline/time.Second)+1 {
			t.Errorf("posts = %d, the loop ran past the renew deadline", posts["a"])
		}
	})
}

func TestRunRejectsInvalidTimings(t *testing.T) {
	cfg := config("a")
	cfg.LeaseDuration, cfg.RenewDeadline = 5*time.Second, 10*time.Second
	err := leader.Run(t.Context(), fake.NewClientset(), cfg, func(context.Context) error { return nil })
	if err == nil {
		t.Fatal("Run() = nil, want a config error")
	}
}
