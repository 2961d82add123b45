// Package nodewright is the CDK construct that deploys nodewright for one
// EKS cluster: New(scope, id, props) creates, inside one construct,
//
//   - the intake API (API Gateway REST API, IAM authorization, a resource
//     policy that lets only the forwarder's role invoke it) in api.go;
//   - the Lambdas, one entry each in the table of functions.go
//     (provided.al2023, arm64, code from dist/<name>/bootstrap), each with
//     its own role, log group, memory, timeout, environment and trigger;
//   - the queues with their dead-letter queues in queues.go;
//   - the DynamoDB table, whose keys, indexes and TTL attribute come from
//     shared/aws/ddbstore/schema.json (the store's Schema()), in table.go;
//   - the state machines, one per statemachines/*.asl.json, with every
//     ${Placeholder} filled, in workflows.go;
//   - the interruption EventBridge rules and the Scheduler schedules in
//     events.go;
//   - the least-privilege IAM (EC2 actions conditioned on the cluster's tags
//     as Karpenter's controller policy does, iam:PassRole for the node role
//     only), the node role and instance profile, the forwarder's role (EKS
//     Pod Identity or IRSA) and the EKS access entries of the Lambdas that
//     reach the cluster, in iam.go and cluster.go;
//   - alarms and a dashboard in monitoring.go;
//   - cdk-nag suppressions, each with its reason, in nag.go.
//
// The construct reads only the files Props.Assets names: it imports
// nothing from the runtime module (STYLE import rule 6). New returns an
// error, never panics, for invalid props and for missing or inconsistent
// assets (a Lambda without its bootstrap, a state machine placeholder
// without a value), so `cdk synth` fails with a message naming the file.
package nodewright
