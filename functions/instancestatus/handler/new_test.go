package handler

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
)

func TestNew(t *testing.T) {
	valid := func() Config {
		cfg, err := LoadConfig(mapEnv(map[string]string{
			"CLUSTER_NAME": "test", "TABLE_NAME": "nodewright", "STATE_MACHINE_ARN": "arn:aws:states:us-west-2:111122223333:stateMachine:interruption",
		}))
		if err != nil {
			t.Fatalf("LoadConfig() error = %v", err)
		}
		return cfg
	}
	unreachable := aws.String("http://127.0.0.1:1")
	clients := func() Clients {
		return Clients{
			DynamoDB: dynamodb.New(dynamodb.Options{Region: "us-west-2", BaseEndpoint: unreachable}),
			EC2:      ec2.New(ec2.Options{Region: "us-west-2", BaseEndpoint: unreachable}),
			SFN:      sfn.New(sfn.Options{Region: "us-west-2", BaseEndpoint: unreachable}),
		}
	}
	log := slog.New(slog.NewJSONHandler(t.Output(), nil))

	t.Run("a loaded config wires a handler", func(t *testing.T) {
		h, err := New(valid(), clients(), log, time.Now)
		if err != nil || h == nil {
			t.Fatalf("New() = %v, %v; want a handler", h, err)
		}
	})

	errCases := []struct {
		name   string
		modify func(*Config, *Clients)
		want   string
	}{
		{name: "no table", modify: func(c *Config, _ *Clients) { c.Table = "" }, want: "table"},
		{name: "a state machine ARN that is not one", modify: func(c *Config, _ *Clients) { c.StateMachineARN = "interruption" }, want: "state machine ARN"},
		{name: "no EC2 client", modify: func(_ *Config, c *Clients) { c.EC2 = nil }, want: "EC2"},
		{name: "no event TTL", modify: func(c *Config, _ *Clients) { c.EventTTL = 0 }, want: "EventTTL"},
	}
	for _, tt := range errCases {
		t.Run(tt.name, func(t *testing.T) {
			cfg, cl := valid(), clients()
			tt.modify(&cfg, &cl)
			_, err := New(cfg, cl, log, time.Now)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v, want one naming %q", err, tt.want)
			}
		})
	}
}
