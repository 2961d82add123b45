package events_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/forwarder/internal/events"
)

// refusingAPI answers every request with status and body, as API Gateway
// does for a caller its resource policy or IAM authorization refuses.
func refusingAPI(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func forwarderDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nodewright-forwarder", Namespace: "nodewright", UID: "dep-uid"}}
}

func post(t *testing.T, rt http.RoundTripper, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/prod/v1/snapshots", strings.NewReader("{}"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip() error = %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func deploymentEvents(t *testing.T, client *fake.Clientset) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events("nodewright").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestRefusals(t *testing.T) {
	const denied = `{"Message":"User: arn:aws:sts::111122223333:assumed-role/other/x is not authorized to perform: execute-api:Invoke on resource: arn:aws:execute-api:us-east-1:111122223333:abc/prod/POST/v1/snapshots with an explicit deny"}`
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	t.Run("should write a Warning on the forwarder's Deployment with the status and what to check, and pass the answer on", func(t *testing.T) {
		client := fake.NewClientset(forwarderDeployment())
		srv := refusingAPI(t, http.StatusForbidden, denied)
		rt := events.NewRefusals(events.RefusalOptions{Events: client.CoreV1(), Deployments: client.AppsV1(),
			Namespace: "nodewright", Name: "nodewright-forwarder", Instance: "fwd-0", Now: clock})
		status, body := post(t, rt, srv.URL)
		if status != http.StatusForbidden || body != denied {
			t.Errorf("caller got %d %q, want the API's answer unchanged", status, body)
		}
		evs := deploymentEvents(t, client)
		if len(evs) != 1 {
			t.Fatalf("events = %d, want 1", len(evs))
		}
		ev := evs[0]
		ref := ev.InvolvedObject
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != "nodewright-forwarder" || ref.UID != "dep-uid" || ref.Namespace != "nodewright" {
			t.Errorf("involved object = %+v", ref)
		}
		if ev.Type != corev1.EventTypeWarning || ev.Reason != events.ReasonAPIRefused || ev.ReportingInstance != "fwd-0" {
			t.Errorf("event = %s %s by %s", ev.Type, ev.Reason, ev.ReportingInstance)
		}
		for _, want := range []string{"POST /prod/v1/snapshots", "HTTP 403", "is not authorized to perform: execute-api:Invoke", "IAM role", "ForwarderRoleArn"} {
			if !strings.Contains(ev.Message, want) {
				t.Errorf("message lacks %q: %s", want, ev.Message)
			}
		}
	})
	t.Run("should count a repeated refusal on its one Event (client-go's correlator)", func(t *testing.T) {
		client := fake.NewClientset(forwarderDeployment())
		srv := refusingAPI(t, http.StatusForbidden, denied)
		at := now
		rt := events.NewRefusals(events.RefusalOptions{Events: client.CoreV1(), Deployments: client.AppsV1(),
			Namespace: "nodewright", Name: "nodewright-forwarder", Now: func() time.Time { return at }})
		post(t, rt, srv.URL)
		at = at.Add(time.Minute)
		post(t, rt, srv.URL)
		at = at.Add(10 * time.Minute)
		post(t, rt, srv.URL)
		evs := deploymentEvents(t, client)
		if len(evs) != 1 {
			t.Fatalf("events = %d, want 1 counting every refusal", len(evs))
		}
		if ev := evs[0]; ev.Count != 3 || !ev.FirstTimestamp.Time.Equal(now) || !ev.LastTimestamp.Time.Equal(at) {
			t.Errorf("event count %d, first %v, last %v; want 3, %v, %v", ev.Count, ev.FirstTimestamp, ev.LastTimestamp, now, at)
		}
	})
	t.Run("should retry an event it failed to write on the next refusal", func(t *testing.T) {
		client := fake.NewClientset(forwarderDeployment())
		fail := true
		client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			if fail {
				return true, nil, errors.New("etcd unavailable")
			}
			return false, nil, nil
		})
		var reported []error
		srv := refusingAPI(t, http.StatusNotFound, `{"message":"Missing Authentication Token"}`)
		rt := events.NewRefusals(events.RefusalOptions{Events: client.CoreV1(), Deployments: client.AppsV1(),
			Namespace: "nodewright", Name: "nodewright-forwarder", Now: clock, OnError: func(err error) { reported = append(reported, err) }})
		if status, _ := post(t, rt, srv.URL); status != http.StatusNotFound {
			t.Errorf("status = %d: a failed event must not change the answer", status)
		}
		if len(reported) != 1 {
			t.Errorf("OnError calls = %d, want 1", len(reported))
		}
		fail = false
		post(t, rt, srv.URL)
		evs := deploymentEvents(t, client)
		if len(evs) != 1 || !strings.Contains(evs[0].Message, "settings.apiEndpoint") {
			t.Errorf("events = %+v, want one naming the endpoint", evs)
		}
	})
	t.Run("should not report answers the client retries or accepts", func(t *testing.T) {
		for _, status := range []int{http.StatusOK, http.StatusAccepted, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable} {
			client := fake.NewClientset(forwarderDeployment())
			srv := refusingAPI(t, status, `{}`)
			rt := events.NewRefusals(events.RefusalOptions{Events: client.CoreV1(), Deployments: client.AppsV1(),
				Namespace: "nodewright", Name: "nodewright-forwarder", Now: clock})
			post(t, rt, srv.URL)
			if n := len(deploymentEvents(t, client)); n != 0 {
				t.Errorf("HTTP %d: %d events, want none", status, n)
			}
		}
	})
}

func TestRefusalMessage(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{"should name the role for 403", 403, `{"Message":"Forbidden"}`, []string{"HTTP 403: Forbidden", "IAM role", "Pod Identity", "role-arn"}},
		{"should name the endpoint for 404", 404, `not json`, []string{"HTTP 404: not json", "settings.apiEndpoint", "ApiEndpoint output"}},
		{"should name the cluster for 400", 400, `{"message":"cluster: \"other\" is not this stack's cluster \"prod\""}`, []string{"HTTP 400: cluster:", "settings.clusterName", "-c clusterName"}},
		{"should cut a long message", 400, strings.Repeat("x", 1000), []string{strings.Repeat("x", 300) + "..."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := events.RefusalMessage("POST", "/prod/v1/podbatches", tt.status, []byte(tt.body))
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("RefusalMessage() = %s\nwant it to contain %s", got, w)
				}
			}
		})
	}
}
