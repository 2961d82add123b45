package kube_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/shared/kube"
)

// apiServer is a TLS server that answers GET /api/v1/nodes/<name> for a
// request bearing one of the accepted tokens, and records what it saw.
type apiServer struct {
	*httptest.Server
	accept map[string]bool

	mu         sync.Mutex
	auths      []string
	userAgents []string
	accepts    []string
}

func newAPIServer(t *testing.T, accept ...string) *apiServer {
	s := &apiServer{accept: map[string]bool{}}
	for _, a := range accept {
		s.accept[a] = true
	}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.auths = append(s.auths, r.Header.Get("Authorization"))
	s.userAgents = append(s.userAgents, r.Header.Get("User-Agent"))
	s.accepts = append(s.accepts, r.Header.Get("Accept"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !s.accept[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonUnauthorized, Code: http.StatusUnauthorized})
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
	if r.Method != http.MethodGet || !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	_ = json.NewEncoder(w).Encode(corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func (s *apiServer) seen() (auths, userAgents, accepts []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.auths), slices.Clone(s.userAgents), slices.Clone(s.accepts)
}

// caPEM returns the server's self-signed certificate as PEM.
func (s *apiServer) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// selfSignedPEM returns a fresh self-signed CA certificate as PEM, one the
// test server's certificate does not chain to.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "other-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// tokens returns a token func that hands out the given tokens in turn and
// counts its calls.
func tokens(list ...string) (func(context.Context) (string, error), *int) {
	calls := 0
	var mu sync.Mutex
	return func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		tok := list[min(calls, len(list)-1)]
		calls++
		return tok, nil
	}, &calls
}

func TestRESTConfigSendsTheTokenOfEachRequest(t *testing.T) {
	srv := newAPIServer(t, "token-1", "token-2")
	tok, calls := tokens("token-1", "token-2")
	c, err := kube.New(kube.RESTConfig(srv.URL, srv.caPEM(), tok))
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	for range 2 {
		n, err := c.GetNode(t.Context(), "node-a")
		if err != nil {
			t.Fatalf("GetNode() through RESTConfig error = %v", err)
		}
		if n.Name != "node-a" {
			t.Errorf("GetNode() = %q, want node-a", n.Name)
		}
	}
	auths, agents, accepts := srv.seen()
	if diff := cmp.Diff([]string{"Bearer token-1", "Bearer token-2"}, auths); diff != "" {
		t.Errorf("Authorization headers mismatch (-want +got):\n%s", diff)
	}
	if *calls != 2 {
		t.Errorf("token func called %d times, want once per request (2)", *calls)
	}
	for i := range agents {
		if agents[i] != kube.UserAgent {
			t.Errorf("User-Agent = %q, want %q", agents[i], kube.UserAgent)
		}
		if want := "application/vnd.kubernetes.protobuf,application/json"; accepts[i] != want {
			t.Errorf("Accept = %q, want %q", accepts[i], want)
		}
	}
}

func TestRESTConfigErrors(t *testing.T) {
	errNoCreds := errors.New("no credentials")
	otherCA := selfSignedPEM(t)
	tests := []struct {
		name      string
		token     func(context.Context) (string, error)
		caPEM     func(srv *apiServer) []byte
		wantIs    error
		wantCalls int
	}{
		{
			name:   "a failing token func fails the request before it is sent",
			token:  func(context.Context) (string, error) { return "", errNoCreds },
			caPEM:  (*apiServer).caPEM,
			wantIs: errNoCreds,
		},
		{
			name:  "a server certificate that does not chain to caPEM is refused",
			token: func(context.Context) (string, error) { return "token-1", nil },
			caPEM: func(*apiServer) []byte { return otherCA },
		},
		{
			name:      "a token the server rejects is an error",
			token:     func(context.Context) (string, error) { return "stale", nil },
			caPEM:     (*apiServer).caPEM,
			wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newAPIServer(t, "token-1")
			c, err := kube.New(kube.RESTConfig(srv.URL, tt.caPEM(srv), tt.token))
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			_, err = c.GetNode(t.Context(), "node-a")
			if err == nil {
				t.Fatal("GetNode() error = nil, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("GetNode() error = %v, want it to wrap %v", err, tt.wantIs)
			}
			if errors.Is(err, kube.ErrNotFound) {
				t.Errorf("GetNode() error = %v matches ErrNotFound", err)
			}
			if auths, _, _ := srv.seen(); len(auths) != tt.wantCalls {
				t.Errorf("server saw %d requests, want %d", len(auths), tt.wantCalls)
			}
		})
	}
}

func TestRESTConfigSettings(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\n")
	cfg := kube.RESTConfig("https://ABC.gr7.eu-west-1.eks.amazonaws.com", ca, func(context.Context) (string, error) { return "t", nil })
	ca[0] = 'X'
	type settings struct {
		Host, UserAgent string
		QPS             float32
		Burst           int
		Timeout         string
		CAData          string
		BearerToken     string
	}
	got := settings{
		Host: cfg.Host, UserAgent: cfg.UserAgent, QPS: cfg.QPS, Burst: cfg.Burst, Timeout: cfg.Timeout.String(),
		CAData: string(cfg.CAData), BearerToken: cfg.BearerToken,
	}
	want := settings{
		Host: "https://ABC.gr7.eu-west-1.eks.amazonaws.com", UserAgent: "nodewright", QPS: 50, Burst: 100, Timeout: "15s",
		CAData: "-----BEGIN CERTIFICATE-----\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RESTConfig() mismatch (-want +got):\n%s", diff)
	}
	if cfg.WrapTransport == nil {
		t.Error("RESTConfig() has no WrapTransport to set the bearer token")
	}
}
