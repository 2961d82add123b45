package stack_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// sample is one line of the Prometheus text format: a series and its
// value (a histogram's or summary's _count, _sum and _bucket lines and
// its quantile series are samples of their own).
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scraped is one scrape of the forwarder's /metrics.
type scraped []sample

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrapeForwarder reads the running forwarder's /metrics (text format
// 0.0.4: name{label="value",...} value per line).
func scrapeForwarder(t testing.TB, s *stack.Stack) scraped {
	t.Helper()
	url := s.ForwarderMetricsURL()
	if url == "" {
		t.Fatal("the forwarder is not running: nothing to scrape")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	var out scraped
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		smp := sample{labels: map[string]string{}}
		var rest string
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				t.Fatalf("scrape %s: malformed line %q", url, line)
			}
			smp.name = line[:i]
			for _, m := range labelPair.FindAllStringSubmatch(line[i+1:j], -1) {
				v, err := strconv.Unquote(`"` + m[2] + `"`)
				if err != nil {
					t.Fatalf("scrape %s: label %s of %q: %v", url, m[1], line, err)
				}
				smp.labels[m[1]] = v
			}
			rest = line[j+1:]
		} else {
			name, value, _ := strings.Cut(line, " ")
			smp.name, rest = name, value
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			t.Fatalf("scrape %s: value of %q: %v", url, line, err)
		}
		smp.value = v
		out = append(out, smp)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return out
}

// sum adds the values of name's series whose labels include match; ok is
// false when no series matches.
func (m scraped) sum(name string, match map[string]string) (total float64, ok bool) {
	for _, s := range m {
		if s.name != name {
			continue
		}
		all := true
		for k, v := range match {
			if s.labels[k] != v {
				all = false
			}
		}
		if all {
			total += s.value
			ok = true
		}
	}
	return total, ok
}

// counters returns every karpenter_* counter series (the _total names)
// and stored histogram or summary count by series key: what must not
// change when the forwarder restarts.
func (m scraped) counters() map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if strings.HasPrefix(s.name, "karpenter_") && (strings.HasSuffix(s.name, "_total") || strings.HasSuffix(s.name, "termination_duration_seconds_count")) {
			out[v1.SeriesKey(s.name, s.labels)] = s.value
		}
	}
	return out
}

// metricWant is one Karpenter series (or the sum of the series matching
// labels) and the value it must have.
type metricWant struct {
	name   string
	labels map[string]string
	want   float64
	// atLeast accepts any value >= want (a retried call observes twice).
	atLeast bool
}

func (w metricWant) String() string {
	op := "=="
	if w.atLeast {
		op = ">="
	}
	return fmt.Sprintf("%s %s %v", v1.SeriesKey(w.name, w.labels), op, w.want)
}

// mismatches lists the wants the scrape does not meet.
func (m scraped) mismatches(wants []metricWant) []string {
	var out []string
	for _, w := range wants {
		got, ok := m.sum(w.name, w.labels)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: not served", w))
		case w.atLeast && got < w.want, !w.atLeast && got != w.want:
			out = append(out, fmt.Sprintf("%s: got %v", w, got))
		}
	}
	return out
}

// eventuallyMetrics scrapes until every want holds (the forwarder reads
// the stored series at most every 10 s) and returns that scrape.
func eventuallyMetrics(t testing.TB, s *stack.Stack, timeout time.Duration, what string, wants []metricWant) scraped {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m := scrapeForwarder(t, s)
		bad := m.mismatches(wants)
		if len(bad) == 0 {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %s the forwarder's /metrics still has:\n%s", what, timeout, strings.Join(bad, "\n"))
		}
		time.Sleep(time.Second)
	}
}

// launchedNodeClaims counts the NodeClaims the EC2 simulator launched an
// instance for: the distinct ClientTokens (one per NodeClaim, so a
// replayed CreateFleet counts once) of the fleets that returned one.
func launchedNodeClaims(s *stack.Stack) int {
	tokens := map[string]bool{}
	for _, f := range s.Sim.Fleets() {
		if len(f.InstanceIDs) > 0 {
			tokens[f.ClientToken] = true
		}
	}
	return len(tokens)
}

// executionNames lists the disruption executions' names and statuses.
func executionNames(s *stack.Stack) []string {
	var out []string
	for _, e := range s.Executions() {
		out = append(out, e.Name+" "+e.Status)
	}
	return out
}

// startedExecutions counts the disruption executions whose name starts
// with prefix (drift-, empty-, ...).
func startedExecutions(s *stack.Stack, prefix string) int {
	n := 0
	for _, e := range s.Executions() {
		if strings.HasPrefix(e.Name, prefix) {
			n++
		}
	}
	return n
}

// diffCounters lists the series of before that after lacks or serves with
// another value, and those after adds.
func diffCounters(before, after map[string]float64) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if v, ok := after[k]; !ok || v != before[k] {
			out = append(out, fmt.Sprintf("%s: %v before, %v (served %v) after", k, before[k], v, ok))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[k]; !ok {
			out = append(out, fmt.Sprintf("%s: new after the restart (%v)", k, after[k]))
		}
	}
	return out
}
