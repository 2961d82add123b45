// Package lambdakit is the plumbing every nodewright Lambda shares: a JSON
// slog logger that stamps each record with the invocation's AWS request ID,
// typed configuration loading from a getenv function (STYLE rule 5), the
// translation of domain errors into the closed set of workflow error names
// (STYLE rule 7), and the aws.Config the functions build their SDK clients
// from.
//
// It imports aws-lambda-go, the SDK's config loader, shared/workflow and the
// standard library; never a service client (the EC2 client alone takes a
// minute and a half to compile cold).
package lambdakit
