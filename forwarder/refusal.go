package main

import (
	"log/slog"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/forwarder/internal/events"
)

// intakeTimeout bounds one request to the intake API (intake.Options'
// default).
const intakeTimeout = 30 * time.Second

// refusalReporting is the intake client's HTTP client: it writes a Warning
// Event on the forwarder's own Deployment (cfg.Deployment in cfg.Namespace)
// when the API refuses a request (events.Refusals), so that
// `kubectl -n nodewright describe deployment nodewright-forwarder` shows the
// status and what to check. Without a namespace (outside a pod) it is a
// plain client.
func refusalReporting(cfg config, log *slog.Logger, kube kubernetes.Interface) *http.Client {
	if cfg.Namespace == "" || cfg.Deployment == "" {
		return &http.Client{Timeout: intakeTimeout}
	}
	return &http.Client{Timeout: intakeTimeout, Transport: events.NewRefusals(events.RefusalOptions{
		Events: kube.CoreV1(), Deployments: kube.AppsV1(), Namespace: cfg.Namespace, Name: cfg.Deployment,
		Instance: cfg.Identity, Now: time.Now,
		OnError: func(err error) {
			log.Warn("intake API refused a request; the event about it was not written", "error", err)
		},
	})}
}
