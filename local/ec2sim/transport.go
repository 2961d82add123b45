package ec2sim

import (
	"io"
	"net/http"
)

// LoopbackTransport wraps base (nil means http.DefaultTransport) for SDK
// clients that talk to the simulator, or to any other in-process stand-in,
// over loopback. Use it as the transport of the client's HTTPClient.
//
// It works around a race between aws-sdk-go-v2 and net/http that a
// loopback server, which answers within microseconds, turns from rare into
// frequent (about one large answer in four on a 2-core machine): the SDK
// closes the request body as soon as the response headers arrive, its body
// wrapper then answers WriteTo with io.EOF, and when net/http's final
// "is the body really finished" read comes after that, the transport treats
// the EOF as a write failure and closes the connection under the response
// being read. The SDK reports "deserialization failed ... use of closed
// network connection" with status 200 (aws/aws-sdk-go-v2#2737). The
// wrapper hides the body's io.WriterTo method from net/http, so the late
// read is a plain Read that returns a clean EOF. Requests are otherwise
// unchanged; the caller's request is not modified.
func LoopbackTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return loopbackTransport{base: base}
}

type loopbackTransport struct{ base http.RoundTripper }

// onlyReadCloser exposes Read and Close only.
type onlyReadCloser struct{ io.ReadCloser }

func (t loopbackTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Body = onlyReadCloser{req.Body}
	return t.base.RoundTrip(r)
}
