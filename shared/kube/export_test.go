package kube

import "time"

// JitteredBackoff exposes the retry pause for its bounds test.
var JitteredBackoff = jitteredBackoff

// WithoutBackoff makes c retry conflicts at once, so that tests do not
// sleep.
func WithoutBackoff(c *Client) *Client {
	c.backoff = func(int) time.Duration { return 0 }
	return c
}
