package nodewright

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
)

// tableSchema mirrors shared/aws/ddbstore's TableSchema, the JSON form of
// the store's Schema() (schema.json). Every key attribute is a string.
type tableSchema struct {
	PartitionKey string        `json:"partitionKey"`
	SortKey      string        `json:"sortKey"`
	TTLAttribute string        `json:"ttlAttribute"`
	BillingMode  string        `json:"billingMode"`
	Indexes      []indexSchema `json:"globalSecondaryIndexes"`
	// Access is, per function name, the partition-key patterns (after
	// "<cluster>#") it reads and writes (ddbstore.Access).
	Access map[string]tableAccess `json:"access"`
}

type tableAccess struct {
	Read  []string `json:"read"`
	Write []string `json:"write"`
	// Indexes are the indexes it queries.
	Indexes []string `json:"indexes"`
}

type indexSchema struct {
	Name         string `json:"name"`
	PartitionKey string `json:"partitionKey"`
	SortKey      string `json:"sortKey,omitempty"`
	Projection   string `json:"projection"`
}

// readTableSchema reads and checks schema.json. Unknown fields are errors:
// a schema change the construct does not understand must not deploy a
// table that silently differs from the store's.
func readTableSchema(path string) (tableSchema, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return tableSchema{}, fmt.Errorf("table schema: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s tableSchema
	if err := dec.Decode(&s); err != nil {
		return tableSchema{}, fmt.Errorf("table schema %s: %w", path, err)
	}
	switch {
	case s.PartitionKey == "":
		return s, fmt.Errorf("table schema %s: partitionKey: required", path)
	case s.BillingMode != "PAY_PER_REQUEST":
		return s, fmt.Errorf("table schema %s: billingMode %q: only PAY_PER_REQUEST is deployed", path, s.BillingMode)
	}
	for _, ix := range s.Indexes {
		if ix.Name == "" || ix.PartitionKey == "" {
			return s, fmt.Errorf("table schema %s: index %q: name and partitionKey are required", path, ix.Name)
		}
		if _, ok := projections[ix.Projection]; !ok {
			return s, fmt.Errorf("table schema %s: index %s: projection %q: must be ALL or KEYS_ONLY", path, ix.Name, ix.Projection)
		}
	}
	return s, nil
}

var projections = map[string]awsdynamodb.ProjectionType{
	"ALL":       awsdynamodb.ProjectionType_ALL,
	"KEYS_ONLY": awsdynamodb.ProjectionType_KEYS_ONLY,
}

func stringAttr(name string) *awsdynamodb.Attribute {
	if name == "" {
		return nil
	}
	return &awsdynamodb.Attribute{Name: jsii.String(name), Type: awsdynamodb.AttributeType_STRING}
}

// newTable creates the one table (AWS::DynamoDB::Table): on-demand,
// point-in-time recovery, encrypted with the AWS managed key, TTL on the
// schema's attribute, kept (and protected from deletion) when the stack is
// deleted, since it holds the NodeClaims that name running instances.
func newTable(d *deployment, s tableSchema) awsdynamodb.Table {
	var ttl *string
	if s.TTLAttribute != "" {
		ttl = jsii.String(s.TTLAttribute)
	}
	table := awsdynamodb.NewTable(d.scope, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        stringAttr(s.PartitionKey),
		SortKey:             stringAttr(s.SortKey),
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: ttl,
		Encryption:          awsdynamodb.TableEncryption_AWS_MANAGED,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	for _, ix := range s.Indexes {
		table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(ix.Name),
			PartitionKey:   stringAttr(ix.PartitionKey),
			SortKey:        stringAttr(ix.SortKey),
			ProjectionType: projections[ix.Projection],
		})
	}
	return table
}
