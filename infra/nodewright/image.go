package nodewright

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecr"
	"github.com/aws/jsii-runtime-go"
)

// imagesKept is how many tagged forwarder images (one multi-platform index
// per `make image-push`) the repository keeps; older ones expire.
const imagesKept = 20

// newImageRepository creates the ECR repository `make image-push` pushes
// the forwarder image to: scanned on push, with immutable tags (a version
// tag always names the digest first pushed under it), and a lifecycle rule
// that expires tagged images beyond the newest imagesKept. The rule counts
// tagged artifacts only, so it never expires the per-platform manifests of
// an index it keeps. The repository is retained on `cdk destroy` (the
// README's uninstall deletes it), so a running forwarder never loses its
// image to a stack update.
func newImageRepository(d *deployment) awsecr.Repository {
	return awsecr.NewRepository(d.scope, jsii.String("ForwarderImageRepository"), &awsecr.RepositoryProps{
		ImageScanOnPush:    jsii.Bool(true),
		ImageTagMutability: awsecr.TagMutability_IMMUTABLE,
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
		LifecycleRules: &[]*awsecr.LifecycleRule{{
			Description:    jsii.String("keep the newest forwarder images"),
			RulePriority:   jsii.Number(1),
			TagStatus:      awsecr.TagStatus_TAGGED,
			TagPatternList: jsii.Strings("*"),
			MaxImageCount:  jsii.Number(imagesKept),
		}},
	})
}

// Names the Helm chart and the stack agree on (charts/nodewright).
const (
	helmRelease = "nodewright"
	helmChart   = "charts/nodewright"
)

// helmInstallCommand is the `helm upgrade --install` of charts/nodewright
// with every value the stack knows filled in (run from the repository, after
// make image-push, which writes dist/image/digest): the cluster name, the
// intake endpoint, the image repository and, with IRSA, the forwarder's role.
func helmInstallCommand(d *deployment, repositoryURI *string) *string {
	parts := []*string{
		jsii.String("helm upgrade --install " + helmRelease + " " + helmChart + " --namespace " + forwarderNamespace + " --create-namespace" +
			" --set settings.clusterName=" + d.props.Cluster.Name + " --set settings.apiEndpoint="),
		d.api.Url(),
		jsii.String(" --set image.repository="),
		repositoryURI,
		jsii.String(` --set image.digest="$(cat dist/image/digest)"`),
	}
	if d.props.ForwarderOIDCProviderARN != "" {
		parts = append(parts, jsii.String(` --set serviceAccount.annotations.eks\.amazonaws\.com/role-arn=`), d.forwarder.RoleArn())
	}
	return awscdk.Fn_Join(jsii.String(""), &parts)
}

// imagePushCommand logs in to the repository's registry with the caller's
// AWS credentials (writing the Docker config) and pushes `make image`'s
// image there.
func imagePushCommand(d *deployment, repo awsecr.Repository) *string {
	registry := awscdk.Fn_Select(jsii.Number(0), awscdk.Fn_Split(jsii.String("/"), repo.RepositoryUri(), nil))
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("aws ecr get-login-password --region "), d.stack.Region(),
		jsii.String(" | make image-login REGISTRY="), registry,
		jsii.String(" && make image-push IMAGE="), repo.RepositoryUri(),
	})
}
