package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// ReasonAPIRefused is the reason of the Warning Event written on the
// forwarder's Deployment when the intake API refuses a request.
const ReasonAPIRefused = "APIRefused"

// RefusalOptions configure a Refusals.
type RefusalOptions struct {
	// Next sends the requests; nil means http.DefaultTransport.
	Next http.RoundTripper
	// Events and Deployments are the clients; the Deployment is read once,
	// for its UID (kubectl describe lists events by UID).
	Events      corev1client.EventsGetter
	Deployments appsv1client.DeploymentsGetter
	// Namespace and Name are the forwarder's Deployment.
	Namespace, Name string
	// Instance is this replica (the reporting instance).
	Instance string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnError, when set, is told when an Event could not be written.
	OnError func(error)
}

// Refusals is an http.RoundTripper for the intake client that, when the
// API answers 4xx other than 429 (which the client retries), writes a
// Warning Event (ReasonAPIRefused) on the forwarder's Deployment with the
// method, path, HTTP status, the API's message and what to check for that
// status. Repeats are counted on one Event by client-go's EventCorrelator
// (see the package doc), not written again. The response reaches the caller unchanged; an Event that
// cannot be written is reported to OnError and never fails the request.
// It is safe for concurrent use.
type Refusals struct {
	o   RefusalOptions
	w   *correlated
	mu  sync.Mutex
	uid types.UID
}

// NewRefusals returns a Refusals for o.
func NewRefusals(o RefusalOptions) *Refusals {
	if o.Next == nil {
		o.Next = http.DefaultTransport
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Refusals{o: o, w: newCorrelated(o.Events, o.Now)}
}

// RoundTrip sends req through Next and reports a refusal.
func (r *Refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.o.Next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return resp, err
	}
	body, readErr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if readErr != nil {
		return resp, nil // the caller sees the short body and the status
	}
	if err := r.report(req.Context(), req.Method, req.URL.Path, resp.StatusCode, body); err != nil && r.o.OnError != nil {
		r.o.OnError(err)
	}
	return resp, nil
}

func (r *Refusals) report(ctx context.Context, method, path string, status int, body []byte) error {
	now := r.o.Now()
	r.mu.Lock()
	uid := r.uid
	r.mu.Unlock()

	// The request's context may be nearly spent; the Event gets its own
	// short deadline.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if uid == "" {
		d, err := r.o.Deployments.Deployments(r.o.Namespace).Get(ctx, r.o.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("refusal event: deployment %s/%s: %w", r.o.Namespace, r.o.Name, err)
		}
		uid = d.UID
	}
	ev := newEvent(fmt.Sprintf("%s.%x", r.o.Name, now.UnixNano()), r.o.Namespace,
		corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: r.o.Namespace, Name: r.o.Name, UID: uid},
		corev1.EventTypeWarning, ReasonAPIRefused, RefusalMessage(method, path, status, body), metav1.NewTime(now), r.o.Instance)
	if _, err := r.w.write(ev); err != nil {
		return fmt.Errorf("refusal event: %w", err)
	}
	r.mu.Lock()
	r.uid = uid
	r.mu.Unlock()
	return nil
}

// maxAPIMessage bounds how much of the API's message an Event quotes.
const maxAPIMessage = 300

// RefusalMessage is the Event message for a refused request: what was
// refused, the API's own message (ErrorResponse.message, or the body), and
// what to check for that status.
func RefusalMessage(method, path string, status int, body []byte) string {
	var er v1.ErrorResponse
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &er) == nil && er.Message != "" {
		msg = er.Message
	}
	if len(msg) > maxAPIMessage {
		msg = msg[:maxAPIMessage] + "..."
	}
	var check string
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		check = "the forwarder's IAM role: the stack's EKS Pod Identity association for nodewright/nodewright-forwarder, " +
			"or with IRSA the ServiceAccount's eks.amazonaws.com/role-arn annotation, must name the ForwarderRoleArn output " +
			"(the API admits that role only), and the endpoint must be this stack's"
	case http.StatusNotFound:
		check = "the endpoint: settings.apiEndpoint (API_ENDPOINT) must be the stack's ApiEndpoint output, stage included"
	default:
		check = "the cluster name: settings.clusterName (CLUSTER_NAME) must be the -c clusterName the stack was deployed with; " +
			"otherwise the forwarder and the stack are of different versions (the message names the field)"
	}
	return fmt.Sprintf("intake API refused %s %s with HTTP %d: %s. Check %s.", method, path, status, msg, check)
}
