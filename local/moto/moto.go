// Package moto starts moto_server, the Python AWS emulator
// (github.com/getmoto/moto, a pip package whose moto_server command serves
// every emulated service on one HTTP port), for tests that check the
// product and the EC2 simulator against an implementation nobody here
// wrote. moto carries AWS's own per-region instance-type data and
// per-zone offerings; it does not implement the Price List API, real Spot
// prices or ClientToken idempotency.
//
// Start is test-only plumbing: it skips the test, with the reason, where
// moto_server is not installed.
package moto

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Command is the executable Start runs, looked up on PATH.
const Command = "moto_server"

// startTimeout bounds how long moto_server may take to answer its first
// request (Python start-up on a loaded machine takes several seconds).
const startTimeout = 90 * time.Second

// Server is one running moto_server on loopback.
type Server struct {
	// URL is the base endpoint, "http://127.0.0.1:<port>", for every
	// service's BaseEndpoint.
	URL string
}

// Start runs moto_server on a free loopback port and returns it once it
// answers; the process is killed when the test ends. It calls t.Skip when
// moto_server is not on PATH, and t.Fatal when it does not start in time.
func Start(t testing.TB) *Server {
	t.Helper()
	path, err := exec.LookPath(Command)
	if err != nil {
		t.Skipf("%s not found on PATH (pip install 'moto[server]' provides it): %v", Command, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	var out syncBuffer
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", Command, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if s.ready(ctx) {
			return s
		}
		select {
		case err := <-exited:
			t.Fatalf("%s exited before answering: %v\n%s", Command, err, out.String())
		case <-ctx.Done():
			t.Fatalf("%s did not answer within %v:\n%s", Command, startTimeout, out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ready reports whether moto answers its own API.
func (s *Server) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/moto-api/data.json", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Reset drops every resource moto holds (POST /moto-api/reset), so tests
// sharing one server start from its seeded state.
func (s *Server) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("moto reset: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("moto reset: HTTP %d", resp.StatusCode)
	}
	return nil
}

// syncBuffer collects the server's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Query sends one EC2 Query request (API version 2016-11-15) to moto by
// hand, without the SDK or any product code, for region (moto reads the
// region from the signature's credential scope; the signature itself is
// not checked), and returns the raw XML body. A transport error or a
// status other than 200 fails t, naming the form's Action.
func (s *Server) Query(t testing.TB, region string, form url.Values) []byte {
	t.Helper()
	form.Set("Version", "2016-11-15")
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL+"/", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261202/"+region+"/ec2/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", form.Get("Action"), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d %v: %s", form.Get("Action"), resp.StatusCode, err, body)
	}
	return body
}
