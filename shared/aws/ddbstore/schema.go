package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Index names.
const (
	// IndexByInstance maps "<cluster>#<instance-id>" to the NodeClaim
	// (KEYS_ONLY; sparse: only launched claims have the key).
	IndexByInstance = "byInstance"
	// IndexByNodePool maps "<cluster>#<nodepool>" to its NodeClaims, sorted
	// by name (ALL attributes; sparse: only claims with the nodepool label).
	IndexByNodePool = "byNodePool"
)

// TTLAttribute is the table's time-to-live attribute: Unix seconds after
// which DynamoDB may delete the item (typically within days, so readers
// filter expired items themselves).
const TTLAttribute = attrExpiresAt

// TableSchema is the table's definition in a form free of SDK types, so the
// CDK app (a separate module) can read the same definition from schema.json.
type TableSchema struct {
	PartitionKey string        `json:"partitionKey"`
	SortKey      string        `json:"sortKey"`
	TTLAttribute string        `json:"ttlAttribute"`
	BillingMode  string        `json:"billingMode"`
	Indexes      []IndexSchema `json:"globalSecondaryIndexes"`
	// Access is, per component (the Lambda's name), the partition keys it
	// touches; the CDK app scopes that component's DynamoDB actions to them
	// with dynamodb:LeadingKeys conditions. A component not listed is
	// scoped to its cluster's keys only.
	Access map[string]Access `json:"access"`
}

// Access lists the partition keys one component reads (GetItem, Query) and
// writes (PutItem, UpdateItem, DeleteItem, also as the items of a
// TransactWriteItems; GetItem and Query too, as conditional writes
// re-read). Each entry is a pattern of the key after "<cluster>#": exact, or
// ending in "*" for any rest (IAM StringLike). Indexes names the indexes it
// queries: LeadingKeys of an index query is the index's partition key
// ("<cluster>#<instance id>", "<cluster>#<nodepool>"), so an index grant is
// "<cluster>#*", the narrowest pattern that key allows.
type Access struct {
	Read    []string `json:"read"`
	Write   []string `json:"write"`
	Indexes []string `json:"indexes,omitempty"`
}

// Allows reports whether a call of op (GetItem, Query, PutItem, UpdateItem
// or DeleteItem) on index ("" for the table) naming partition key pk is within
// a for cluster: the check IAM makes of the role the CDK app builds from a,
// for tests that run a component against a recording client.
func (a Access) Allows(cluster, op, index, pk string) bool {
	rest, ok := strings.CutPrefix(pk, cluster+"#")
	if !ok {
		return false
	}
	if index != "" {
		return op == "Query" && slices.Contains(a.Indexes, index)
	}
	match := func(patterns []string) bool {
		for _, p := range patterns {
			if prefix, wild := strings.CutSuffix(p, "*"); (wild && strings.HasPrefix(rest, prefix)) || rest == p {
				return true
			}
		}
		return false
	}
	switch op {
	case "GetItem", "Query":
		return match(a.Read) || match(a.Write)
	case "PutItem", "UpdateItem", "DeleteItem":
		return match(a.Write)
	}
	return false
}

// IndexSchema is one global secondary index. Every key attribute is a
// string (S).
type IndexSchema struct {
	Name         string `json:"name"`
	PartitionKey string `json:"partitionKey"`
	SortKey      string `json:"sortKey,omitempty"`
	// Projection is "ALL" or "KEYS_ONLY".
	Projection string `json:"projection"`
}

// Schema returns the table definition the store expects: string keys pk and
// sk, the byInstance and byNodePool indexes, TTL on expiresAt, on-demand
// billing. docs/dynamodb.md explains each part; schema.json is its JSON form.
func Schema() TableSchema {
	return TableSchema{
		PartitionKey: attrPK,
		SortKey:      attrSK,
		TTLAttribute: TTLAttribute,
		BillingMode:  string(types.BillingModePayPerRequest),
		Indexes: []IndexSchema{
			{Name: IndexByInstance, PartitionKey: attrInstanceKey, Projection: string(types.ProjectionTypeKeysOnly)},
			{Name: IndexByNodePool, PartitionKey: attrNodePoolKey, SortKey: attrSK, Projection: string(types.ProjectionTypeAll)},
		},
		Access: map[string]Access{
			"intake":         intakeAccess(),
			"interruption":   interruptionAccess(),
			"instancestatus": instanceStatusAccess(),
			"provisioner":    provisionerAccess(),
			"gc":             gcAccess(),
			"disruption":     disruptionAccess(),
			"disrupttask":    disruptTaskAccess(),
			"replace":        replaceAccess(),
		},
	}
}

// intakeAccess is what the internet-facing intake Lambda touches
// (docs/dynamodb.md, "Who reads and writes what"): it writes only its
// idempotency keys, claim-checked payloads, the config item and snapshot
// parts (no idempotency key: PutSnapshotPart is itself idempotent), and
// reads batch results, NodeClaims, event records and node-class
// resolutions; it can neither write a NodeClaim nor touch a lease or budget.
func intakeAccess() Access {
	var keys []string
	for _, scope := range []string{ScopeBatch, ScopeConfig, ScopeRegistrations} {
		keys = append(keys, pkIdempotency+"#"+scope+"#*")
	}
	write := append(keys, pkPayload+"#*", pkConfig, pkSnapshot, pkSnapshot+"#*")
	read := []string{pkBatch + "#*", pkNodeClaim, pkEvent, pkNodeClassStatus, pkMetric}
	return Access{Read: read, Write: write}
}

// interruptionAccess is what the interruption Lambda (the EventBridge queue's
// consumer) touches: it finds the NodeClaim of an instance (the byInstance
// index, then the claim), and writes only its idempotency keys, unavailable
// offerings and event records; it can neither write a NodeClaim nor touch a
// lease or budget.
func interruptionAccess() Access {
	return Access{
		Read:    []string{pkNodeClaim},
		Write:   []string{pkIdempotency + "#" + ScopeInterruption + "#*", pkOffering, pkEvent, pkMetric},
		Indexes: []string{IndexByInstance},
	}
}

// instanceStatusAccess is what the instance-status poll touches: it lists
// NodeClaims and writes only its idempotency keys and event records.
func instanceStatusAccess() Access {
	return Access{
		Read:  []string{pkNodeClaim},
		Write: []string{pkIdempotency + "#" + ScopeInstanceStatus + "#*", pkEvent},
	}
}

// provisionerAccess is what the provisioner Lambda touches: it reads the
// config, the current snapshot, claim-checked payloads and the live EC2
// data, and writes
// NodeClaims (finding one by instance through the byInstance index when a
// node registers), batch results, unavailable offerings and subnets,
// node-class resolutions, and the CreateFleet request stored under its
// ClientToken before the call (payload fleet-request/<token>, replayed by a
// retry), and the round's event records (NoCompatibleInstanceTypes,
// InsufficientCapacityError, NodeClassNotReady); it touches no lease,
// budget or idempotency key.
func provisionerAccess() Access {
	return Access{
		Read:    []string{pkConfig, pkSnapshot, pkSnapshot + "#*", pkPayload + "#*", pkEC2Data + "#*"},
		Write:   []string{pkNodeClaim, pkBatch + "#*", pkOffering, pkSubnet, pkNodeClassStatus, pkPayload + "#*", pkMetric, pkEvent},
		Indexes: []string{IndexByInstance},
	}
}

// gcAccess is what garbage collection touches: it reads the config (the
// node classes whose launch templates are in use) and the current snapshot
// (the Karpenter NodeClaims it adopts), reads, creates (adoption), updates
// and deletes NodeClaims, records an event for each adoption it refuses, and
// writes the region's live EC2 data (it is the one refresher); nothing
// else.
func gcAccess() Access {
	return Access{Read: []string{pkConfig, pkSnapshot, pkSnapshot + "#*"}, Write: []string{pkNodeClaim, pkEvent, pkMetric, pkEC2Data + "#*"}}
}

// disruptionAccess is what the scheduled disruption evaluation touches: it
// reads the config, the current snapshot, unavailable offerings and the
// live EC2 data, and
// writes the commands' replacements (claim-checked payloads), event records
// (listing them first, to write only new ones) and node-class resolutions,
// and NodeClaims only to release the claims of
// executions whose lease lapsed (termination.Service.ReleaseStale). Budgets
// are the state machines' (disrupttask's): it touches no lease or budget.
func disruptionAccess() Access {
	return Access{
		Read:  []string{pkConfig, pkSnapshot, pkSnapshot + "#*", pkOffering, pkEC2Data + "#*"},
		Write: []string{pkNodeClaim, pkPayload + "#*", pkEvent, pkNodeClassStatus, pkMetric},
	}
}

// replaceAccess is what the replace Lambda (an operator's manual
// replacement, POST /v1/replacements) touches: it reads what an evaluation
// reads (config, snapshot, NodeClaims, unavailable offerings, live EC2
// data) and writes only the commands' replacements (payload
// disruption/<execution>) and the node-class resolutions it makes on the
// way. It changes no NodeClaim, lease or budget: its executions do.
func replaceAccess() Access {
	return Access{
		Read:  []string{pkConfig, pkSnapshot, pkSnapshot + "#*", pkNodeClaim, pkOffering, pkEC2Data + "#*"},
		Write: []string{pkPayload + "#" + payloadDisruption + "*", pkNodeClassStatus},
	}
}

// disruptTaskAccess is what the disruption task Lambda (every task state
// of the disruption and interruption state machines) touches: it reads the
// commands the disruption Lambda stored (payload disruption/<execution>)
// and, for the replacements' launch (the provisioning launch path), the
// config, unavailable offerings, subnets and the live EC2 data; it writes budget leases,
// NodeClaims (claims, replacements, deletions), event records, the
// offerings and subnets a launch finds unavailable, and the CreateFleet
// request stored under its ClientToken (payload fleet-request/<token>,
// replayed by a retry), and the decision metrics' series (replacements
// created, NodeClaims terminated). It also reads the provisioner's stored
// authorization verdicts (payload nodeclass-auth/<class UID>), never
// writing one. It touches no idempotency key, snapshot, batch or
// node-class resolution.
func disruptTaskAccess() Access {
	return Access{
		Read: []string{pkConfig, pkPayload + "#" + payloadDisruption + "*",
			pkPayload + "#" + PayloadNodeClassAuth + "*", pkEC2Data + "#*"},
		Write: []string{pkNodeClaim, pkBudget, pkEvent, pkOffering, pkSubnet,
			pkPayload + "#" + payloadFleetRequest + "*", pkMetric},
	}
}

// The payload key prefixes of disruptTaskAccess: the commands
// termination.CommandRef names, and the CreateFleet requests the fleet
// adapter stores (functions/internal/adapters FleetRequests). The recording
// tests of disrupttask fail if either moves.
const (
	payloadDisruption   = "disruption/"
	payloadFleetRequest = "fleet-request/"
)

// PayloadNodeClassAuth prefixes the payload key of an EC2NodeClass's
// stored authorization verdict ("nodeclass-auth/<class UID>"): the
// provisioner writes it, the disruption task Lambda reads it.
const PayloadNodeClassAuth = "nodeclass-auth/"

// TableDefinition returns the CreateTable request for a table called name,
// built from Schema.
func TableDefinition(name string) *dynamodb.CreateTableInput {
	sc := Schema()
	attrs := map[string]bool{}
	var defs []types.AttributeDefinition
	addAttr := func(a string) {
		if a == "" || attrs[a] {
			return
		}
		attrs[a] = true
		defs = append(defs, types.AttributeDefinition{AttributeName: strPtr(a), AttributeType: types.ScalarAttributeTypeS})
	}
	keySchema := func(pk, sk string) []types.KeySchemaElement {
		addAttr(pk)
		addAttr(sk)
		ks := []types.KeySchemaElement{{AttributeName: strPtr(pk), KeyType: types.KeyTypeHash}}
		if sk != "" {
			ks = append(ks, types.KeySchemaElement{AttributeName: strPtr(sk), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	in := &dynamodb.CreateTableInput{
		TableName:   strPtr(name),
		BillingMode: types.BillingMode(sc.BillingMode),
		KeySchema:   keySchema(sc.PartitionKey, sc.SortKey),
	}
	for _, ix := range sc.Indexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  strPtr(ix.Name),
			KeySchema:  keySchema(ix.PartitionKey, ix.SortKey),
			Projection: &types.Projection{ProjectionType: types.ProjectionType(ix.Projection)},
		})
	}
	in.AttributeDefinitions = defs
	return in
}

// AdminAPI is the subset of the DynamoDB client CreateTable calls. Only the
// local stack and tests create tables; on AWS the CDK stack does.
type AdminAPI interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ AdminAPI = (*dynamodb.Client)(nil)

// CreateTable creates the table name from TableDefinition, waits up to
// maxWait for it to become ACTIVE and enables TTL on TTLAttribute. It is
// idempotent: an existing table of that name is kept (its definition is not
// compared) and TTL is enabled only if it is not already.
func CreateTable(ctx context.Context, api AdminAPI, name string, maxWait time.Duration) error {
	_, err := api.CreateTable(ctx, TableDefinition(name))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = time.Second
		o.MaxDelay = 5 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, maxWait); err != nil {
		return fmt.Errorf("wait for table %s: %w", name, err)
	}
	ttl, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		return fmt.Errorf("describe ttl of table %s: %w", name, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && d.AttributeName != nil && *d.AttributeName == TTLAttribute &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &name,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: strPtr(TTLAttribute),
			Enabled:       boolPtr(true),
		},
	})
	if err != nil {
		return fmt.Errorf("enable ttl on table %s: %w", name, err)
	}
	return nil
}
