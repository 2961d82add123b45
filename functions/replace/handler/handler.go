// Package handler is the replace Lambda behind POST v1.RouteReplacements:
// it turns an operator's ReplacementRequest (nodewright replace) into the
// disruption decider's Replace (functions/decider), with the
// caller's IAM ARN from API Gateway's request context as the identity the
// executions record, and renders the outcome as a v1.ReplacementResult.
// It decides nothing itself.
package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/functions/decider"
	"github.com/nodewright/nodewright/functions/internal/apigw"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

// replacer is the disruption decider (*decider.Handler).
type replacer interface {
	Replace(ctx context.Context, req decider.ReplaceRequest) (decider.ReplaceResult, error)
}

// Handler serves v1.RouteReplacements.
type Handler struct {
	r   replacer
	log *slog.Logger
}

// New returns a Handler over r.
func New(r replacer, log *slog.Logger) *Handler { return &Handler{r: r, log: log} }

// Handle answers one API Gateway proxy request (see v1.RouteReplacements
// for the status codes). It never returns an error: every outcome is an
// HTTP answer.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	resp := h.serve(ctx, req)
	h.log.InfoContext(ctx, "request", "method", req.HTTPMethod, "path", req.Path, "status", resp.StatusCode,
		"caller", req.RequestContext.Identity.UserArn)
	return resp, nil
}

func (h *Handler) serve(ctx context.Context, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	if p := strings.TrimSuffix(req.Path, "/"); p != v1.RouteReplacements {
		return apigw.JSON(http.StatusNotFound, v1.ErrorResponse{Message: "no route " + req.Path})
	}
	if req.HTTPMethod != http.MethodPost {
		resp := apigw.JSON(http.StatusMethodNotAllowed, v1.ErrorResponse{Message: fmt.Sprintf("%s does not serve %s", req.Path, req.HTTPMethod)})
		resp.Headers["Allow"] = http.MethodPost
		return resp
	}
	data, err := apigw.Body(req)
	if err != nil {
		return apigw.JSON(v1.HTTPStatus(err), v1.NewErrorResponse(err))
	}
	r, err := v1.DecodeReplacementRequest(data)
	if err != nil {
		return apigw.JSON(http.StatusBadRequest, v1.NewErrorResponse(err))
	}
	caller := req.RequestContext.Identity.UserArn
	res, err := h.r.Replace(ctx, decider.ReplaceRequest{
		ManualRequest: disruption.ManualRequest{Nodes: r.Nodes, ForceAfter: time.Duration(r.ForceAfterSeconds) * time.Second},
		DryRun:        r.DryRun, RequestedBy: caller,
	})
	var refused *disruption.RefusedError
	switch {
	case errors.As(err, &refused):
		resp := v1.ErrorResponse{Message: err.Error()}
		for _, f := range refused.Refusals {
			resp.Fields = append(resp.Fields, v1.ErrorField{Path: "nodes[" + f.Node + "]", Message: f.Reason})
		}
		return apigw.JSON(http.StatusUnprocessableEntity, resp)
	case errors.Is(err, disruption.ErrInvalidManualRequest):
		return apigw.JSON(http.StatusBadRequest, v1.ErrorResponse{Message: err.Error()})
	case errors.Is(err, decider.ErrNoIdentity):
		return apigw.JSON(http.StatusForbidden, v1.ErrorResponse{Message: "the request carries no IAM caller identity; the route must be IAM-authorized"})
	case errors.Is(err, decider.ErrNoClusterState):
		return apigw.JSON(http.StatusServiceUnavailable, v1.ErrorResponse{Message: err.Error()})
	case err != nil:
		h.log.ErrorContext(ctx, "replace", "error", err)
		return apigw.JSON(http.StatusInternalServerError, v1.ErrorResponse{Message: "replace: " + err.Error()})
	}
	status := http.StatusCreated
	if r.DryRun {
		status = http.StatusOK
	}
	return apigw.JSON(status, Result(res, caller))
}

// Result renders a decider result as the API's v1.ReplacementResult.
func Result(res decider.ReplaceResult, caller string) v1.ReplacementResult {
	out := v1.ReplacementResult{APIVersion: v1.APIVersion, Kind: v1.KindReplacementResult, DryRun: res.DryRun, Snapshot: res.Snapshot,
		RequestedBy: caller, Nodes: []v1.ReplacementNode{}, Budgets: []v1.ReplacementBudget{}, Warnings: res.Warnings}
	started := map[string]decider.Started{}
	for _, s := range res.Started {
		started[s.Execution] = s
	}
	for i, cmd := range res.Plan.Commands {
		rep := res.Plan.Nodes[i]
		n := v1.ReplacementNode{Node: rep.Node, NodeClaim: rep.NodeClaim, NodePool: rep.NodePool, Execution: cmd.ID,
			Replacements: []string{}, Moving: rep.Moving, DoNotDisrupt: rep.DoNotDisrupt, PDBBlocked: rep.PDBBlocked}
		if s, ok := started[cmd.ID]; ok {
			n.Started, n.AlreadyExisted = true, s.AlreadyExisted
		}
		for _, r := range cmd.Replacements {
			n.Replacements = append(n.Replacements, r.Expected.InstanceType)
		}
		out.Nodes = append(out.Nodes, n)
	}
	for _, b := range res.Plan.Budgets {
		out.Budgets = append(out.Budgets, v1.ReplacementBudget{NodePool: b.NodePool, Reason: string(b.Reason), Allowed: b.Allowed, Available: b.Available})
	}
	return out
}
