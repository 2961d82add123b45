package ec2sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// advancer is a clock the control API can move (FakeClock).
type advancer interface {
	Advance(d time.Duration)
}

// controlRoutes lists the JSON control API the local stack uses to drive
// faults and read state (GET /_sim serves it). Request and response bodies
// are JSON; durations are Go duration strings ("90s").
var controlRoutes = []string{
	"GET    /_sim                           this list",
	"GET    /_sim/instances                 every described instance (Instance)",
	"GET    /_sim/images                    Images",
	"POST   /_sim/images                    Image (JSON; name and architecture required): AddImage; returns the Image",
	"GET    /_sim/instances/{id}            one instance, 404 when unknown",
	"POST   /_sim/instances/{id}/fail       FailInstance",
	"POST   /_sim/instances/{id}/interrupt  InterruptSpot; returns the SpotInterruption",
	"POST   /_sim/instances/{id}/rebalance  RecommendRebalance; returns the RebalanceRecommendation",
	"GET    /_sim/instances/{id}/status     InstanceHealth (status.go: serveStatusControl)",
	"POST   /_sim/instances/{id}/status     {\"check\",\"impaired\",\"since\"}: SetStatus",
	"POST   /_sim/instances/{id}/scheduled-events {\"code\",\"notBefore\"|\"in\"}: ScheduleEvent",
	"GET    /_sim/interruptions             SpotInterruptions",
	"POST   /_sim/unavailable               {\"instanceType\",\"zone\",\"capacityType\",\"code\"}: SetUnavailable",
	"DELETE /_sim/unavailable               same body: ClearUnavailable",
	"POST   /_sim/errors                    {\"action\",\"code\",\"count\"}: InjectError",
	"POST   /_sim/throttle                  {\"action\",\"count\"}: Throttle",
	"POST   /_sim/deny                      Denial {\"action\",\"requestTags\"}: Deny (CreateFleet, CreateLaunchTemplate, RunInstances)",
	"DELETE /_sim/deny                      {\"action\"}: Allow (removes the action's denials)",
	"GET    /_sim/deny                      Denials",
	"POST   /_sim/answers                   {\"action\",\"count\",\"drop\":true|\"delay\":\"5s\"}: DropAnswers / DelayAnswers (the call takes effect, its answer is lost or late)",
	"POST   /_sim/boot-delay                {\"delay\"}: SetBootDelay",
	"POST   /_sim/spot-price                {\"instanceType\",\"zone\",\"price\"}: SetSpotPrice",
	"PUT    /_sim/parameters                {\"name\",\"value\"}: PutParameter",
	"POST   /_sim/subnets/{id}/available-ips {\"count\"}: SetAvailableIPs",
	"GET    /_sim/clock                     {\"now\"}",
	"POST   /_sim/clock/advance             {\"by\"}: advances a FakeClock; 409 with the wall clock",
	"GET    /_sim/network                   Network",
	"GET    /_sim/launch-templates          LaunchTemplates",
	"GET    /_sim/fleets                    Fleets",
	"GET    /_sim/capacity-reservations     CapacityReservations",
	"POST   /_sim/capacity-reservations     CapacityReservation (JSON; instanceType, zone, totalInstanceCount required): AddCapacityReservation; returns it",
	"POST   /_sim/capacity-reservations/{id}/cancel CancelCapacityReservation",
}

// serveControl answers the control API (controlRoutes).
//
//nolint:gocyclo // a flat route switch, one case per controlRoutes entry; its count is the number of routes, not nesting
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	rest, isInstance := strings.CutPrefix(path, "/_sim/instances/")
	switch {
	case r.Method == http.MethodGet && path == "/_sim":
		writeJSON(w, http.StatusOK, map[string][]string{"routes": controlRoutes})
	case r.Method == http.MethodGet && path == "/_sim/images":
		writeJSON(w, http.StatusOK, s.Images())
	case r.Method == http.MethodPost && path == "/_sim/images":
		var img Image
		if !readJSON(w, r, &img) {
			return
		}
		added, err := s.AddImage(img)
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, added)
	case r.Method == http.MethodGet && path == "/_sim/instances":
		writeJSON(w, http.StatusOK, s.Instances())
	case isInstance && r.Method == http.MethodGet && !strings.Contains(rest, "/"):
		in, ok := s.Instance(rest)
		if !ok {
			writeJSONError(w, http.StatusNotFound, fmt.Errorf("instance %s: not found", rest))
			return
		}
		writeJSON(w, http.StatusOK, in)
	case isInstance && r.Method == http.MethodPost && strings.HasSuffix(rest, "/fail"):
		if err := s.FailInstance(strings.TrimSuffix(rest, "/fail")); err != nil {
			writeJSONError(w, http.StatusConflict, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case isInstance && r.Method == http.MethodPost && strings.HasSuffix(rest, "/interrupt"):
		iv, err := s.InterruptSpot(strings.TrimSuffix(rest, "/interrupt"))
		if err != nil {
			writeJSONError(w, http.StatusConflict, err)
			return
		}
		writeJSON(w, http.StatusOK, iv)
	case isInstance && r.Method == http.MethodPost && strings.HasSuffix(rest, "/rebalance"):
		rb, err := s.RecommendRebalance(strings.TrimSuffix(rest, "/rebalance"))
		if err != nil {
			writeJSONError(w, http.StatusConflict, err)
			return
		}
		writeJSON(w, http.StatusOK, rb)
	case isInstance && (strings.HasSuffix(rest, "/status") || strings.HasSuffix(rest, "/scheduled-events")):
		id, route, _ := strings.Cut(rest, "/")
		s.serveStatusControl(w, r, id, route)
	case r.Method == http.MethodGet && path == "/_sim/interruptions":
		writeJSON(w, http.StatusOK, s.SpotInterruptions())
	case path == "/_sim/unavailable" && (r.Method == http.MethodPost || r.Method == http.MethodDelete):
		var in struct {
			Offering
			Code string `json:"code"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		if r.Method == http.MethodPost {
			s.SetUnavailable(in.Offering, in.Code)
		} else {
			s.ClearUnavailable(in.Offering)
		}
		w.WriteHeader(http.StatusNoContent)
	case path == "/_sim/deny" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.Denials())
	case path == "/_sim/deny" && (r.Method == http.MethodPost || r.Method == http.MethodDelete):
		var d Denial
		if !readJSON(w, r, &d) {
			return
		}
		if r.Method == http.MethodDelete {
			s.Allow(d.Action)
		} else if err := s.Deny(d); err != nil {
			writeJSONError(w, http.StatusBadRequest, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && path == "/_sim/answers":
		var in struct {
			Action string `json:"action"`
			Count  int    `json:"count"`
			Drop   bool   `json:"drop"`
			Delay  string `json:"delay"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		var d time.Duration
		if in.Delay != "" {
			var err error
			if d, err = time.ParseDuration(in.Delay); err != nil || d <= 0 {
				writeJSONError(w, http.StatusBadRequest, fmt.Errorf("delay %q: want a positive Go duration", in.Delay))
				return
			}
		}
		if _, ok := ec2Actions[in.Action]; !ok || in.Count < 1 || in.Drop == (d > 0) {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("want an EC2 action, count >= 1 and either drop or delay"))
			return
		}
		if in.Drop {
			s.DropAnswers(in.Action, in.Count)
		} else {
			s.DelayAnswers(in.Action, d, in.Count)
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && (path == "/_sim/errors" || path == "/_sim/throttle"):
		var in struct {
			Action string `json:"action"`
			Code   string `json:"code"`
			Count  int    `json:"count"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		if in.Action == "" || in.Count < 1 || path == "/_sim/errors" && in.Code == "" {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("want action, count >= 1 and (for errors) code"))
			return
		}
		if path == "/_sim/throttle" {
			s.Throttle(in.Action, in.Count)
		} else {
			s.InjectError(in.Action, in.Code, in.Count)
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && path == "/_sim/capacity-reservations":
		writeJSON(w, http.StatusOK, s.CapacityReservations())
	case r.Method == http.MethodPost && path == "/_sim/capacity-reservations":
		var cr CapacityReservation
		if !readJSON(w, r, &cr) {
			return
		}
		added, err := s.AddCapacityReservation(cr)
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, added)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/_sim/capacity-reservations/") && strings.HasSuffix(path, "/cancel"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/_sim/capacity-reservations/"), "/cancel")
		if err := s.CancelCapacityReservation(id); err != nil {
			writeJSONError(w, http.StatusNotFound, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && path == "/_sim/boot-delay":
		var in struct {
			Delay string `json:"delay"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		d, err := time.ParseDuration(in.Delay)
		if err != nil || d < 0 {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("delay %q: want a non-negative Go duration", in.Delay))
			return
		}
		s.SetBootDelay(d)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && path == "/_sim/spot-price":
		var in struct {
			InstanceType string  `json:"instanceType"`
			Zone         string  `json:"zone"`
			Price        float64 `json:"price"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		if in.InstanceType == "" || in.Zone == "" || in.Price <= 0 {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("want instanceType, zone and a positive price"))
			return
		}
		s.SetSpotPrice(in.InstanceType, in.Zone, in.Price)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPut && path == "/_sim/parameters":
		var in struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		if in.Name == "" {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("want name"))
			return
		}
		s.PutParameter(in.Name, in.Value)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/_sim/subnets/") && strings.HasSuffix(path, "/available-ips"):
		var in struct {
			Count int `json:"count"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/_sim/subnets/"), "/available-ips")
		if err := s.SetAvailableIPs(id, in.Count); err != nil {
			writeJSONError(w, http.StatusBadRequest, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && path == "/_sim/clock":
		writeJSON(w, http.StatusOK, map[string]time.Time{"now": s.clock.Now()})
	case r.Method == http.MethodPost && path == "/_sim/clock/advance":
		var in struct {
			By string `json:"by"`
		}
		if !readJSON(w, r, &in) {
			return
		}
		d, err := time.ParseDuration(in.By)
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("by %q: want a Go duration", in.By))
			return
		}
		c, ok := s.clock.(advancer)
		if !ok {
			writeJSONError(w, http.StatusConflict, fmt.Errorf("the simulator runs on the wall clock"))
			return
		}
		c.Advance(d)
		writeJSON(w, http.StatusOK, map[string]time.Time{"now": s.clock.Now()})
	case r.Method == http.MethodGet && path == "/_sim/network":
		writeJSON(w, http.StatusOK, s.Network())
	case r.Method == http.MethodGet && path == "/_sim/launch-templates":
		writeJSON(w, http.StatusOK, s.LaunchTemplates())
	case r.Method == http.MethodGet && path == "/_sim/fleets":
		writeJSON(w, http.StatusOK, s.Fleets())
	default:
		writeJSONError(w, http.StatusNotFound, fmt.Errorf("%s %s: no such control route", r.Method, r.URL.Path))
	}
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSONError(w, http.StatusBadRequest, fmt.Errorf("request body: %w", err))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
