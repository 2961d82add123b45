package ec2sim_test

import (
	"encoding/base64"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/aws/awserr"
)

func TestLaunchTemplateRoundTrip(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	image := e.al2023(t, "x86_64")
	userData := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//--\n"
	clusterTags := []ec2types.Tag{
		{Key: aws.String("eks:eks-cluster-name"), Value: aws.String("nodewright")},
		{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")},
	}
	input := &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("karpenter.k8s.aws/9815641364981361543"),
		ClientToken:        aws.String("lt-token-1"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:  aws.String(image),
			UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(userData))),
			BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"),
				Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}}},
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
				HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
				InstanceMetadataTags: ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled},
			SecurityGroupIds:  []string{e.sim.Network().SecurityGroups[2].ID},
			TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: clusterTags}},
		},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: clusterTags}},
	}
	created, err := e.ec2.CreateLaunchTemplate(t.Context(), input)
	if err != nil {
		t.Fatalf("CreateLaunchTemplate() error = %v", err)
	}
	id := aws.ToString(created.LaunchTemplate.LaunchTemplateId)

	again, err := e.ec2.CreateLaunchTemplate(t.Context(), input)
	if err != nil || aws.ToString(again.LaunchTemplate.LaunchTemplateId) != id {
		t.Errorf("CreateLaunchTemplate() with the same ClientToken = %v, %v; want the same template %s", again, err, id)
	}
	input.ClientToken = aws.String("lt-token-2")
	_, err = e.ec2.CreateLaunchTemplate(t.Context(), input)
	if code, _ := apiCode(err); code != "InvalidLaunchTemplateName.AlreadyExistsException" || awserr.Classify(err) != awserr.AlreadyExists {
		t.Errorf("CreateLaunchTemplate() with a taken name: error = %v, want AlreadyExists", err)
	}

	byTag, err := e.ec2.DescribeLaunchTemplates(t.Context(), &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{"nodewright"}}}})
	if err != nil {
		t.Fatalf("DescribeLaunchTemplates(tag filter) error = %v", err)
	}
	if len(byTag.LaunchTemplates) != 1 || aws.ToString(byTag.LaunchTemplates[0].LaunchTemplateId) != id ||
		aws.ToInt64(byTag.LaunchTemplates[0].LatestVersionNumber) != 1 || len(byTag.LaunchTemplates[0].Tags) != 2 {
		t.Errorf("DescribeLaunchTemplates(tag filter) = %+v, want the template with its two tags", byTag.LaunchTemplates)
	}

	versions, err := e.ec2.DescribeLaunchTemplateVersions(t.Context(), &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: input.LaunchTemplateName, Versions: []string{"$Latest"}})
	if err != nil {
		t.Fatalf("DescribeLaunchTemplateVersions() error = %v", err)
	}
	data := versions.LaunchTemplateVersions[0].LaunchTemplateData
	decoded, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	type summary struct {
		Image, UserData, Device, VolumeType, HTTPTokens, SecurityGroup, TagType string
		VolumeSize, HopLimit                                                    int32
		Encrypted                                                               bool
	}
	got := summary{aws.ToString(data.ImageId), string(decoded), aws.ToString(data.BlockDeviceMappings[0].DeviceName),
		string(data.BlockDeviceMappings[0].Ebs.VolumeType), string(data.MetadataOptions.HttpTokens), data.SecurityGroupIds[0],
		string(data.TagSpecifications[0].ResourceType), aws.ToInt32(data.BlockDeviceMappings[0].Ebs.VolumeSize),
		aws.ToInt32(data.MetadataOptions.HttpPutResponseHopLimit), aws.ToBool(data.BlockDeviceMappings[0].Ebs.Encrypted)}
	want := summary{image, userData, "/dev/xvda", "gp3", "required", e.sim.Network().SecurityGroups[2].ID, "network-interface", 20, 1, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("launch template data round trip mismatch (-want +got):\n%s", diff)
	}

	lt, ok := e.sim.LaunchTemplate("karpenter.k8s.aws/9815641364981361543")
	if !ok || lt.ID != id || string(lt.UserData) != userData || lt.Data["MetadataOptions.HttpTokens"] != "required" ||
		lt.Data["BlockDeviceMapping.1.Ebs.VolumeSize"] != "20" || lt.TagSpecifications["network-interface"]["eks:eks-cluster-name"] != "nodewright" {
		t.Errorf("LaunchTemplate() = %+v, %v", lt, ok)
	}

	if _, err := e.ec2.DeleteLaunchTemplate(t.Context(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: input.LaunchTemplateName}); err != nil {
		t.Fatalf("DeleteLaunchTemplate() error = %v", err)
	}
	_, err = e.ec2.DescribeLaunchTemplates(t.Context(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{aws.ToString(input.LaunchTemplateName)}})
	if code, _ := apiCode(err); code != "InvalidLaunchTemplateName.NotFoundException" || awserr.Classify(err) != awserr.NotFound {
		t.Errorf("DescribeLaunchTemplates() of a deleted name: error = %v, want InvalidLaunchTemplateName.NotFoundException", err)
	}
	_, err = e.ec2.DeleteLaunchTemplate(t.Context(), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
	if awserr.Classify(err) != awserr.NotFound {
		t.Errorf("DeleteLaunchTemplate() twice: error = %v, want NotFound", err)
	}
}

func TestLaunchTemplateErrors(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "versioned", "ami-12345678", "")
	tests := []struct {
		name     string
		call     func() error
		wantCode string
	}{
		{name: "name too short", wantCode: "InvalidLaunchTemplateName.MalformedException", call: func() error {
			_, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt"),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12345678")}})
			return err
		}},
		{name: "user data not base64", wantCode: "InvalidParameterValue", call: func() error {
			_, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad-user-data"),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String("#!/bin/bash")}})
			return err
		}},
		{name: "describe an unknown ID", wantCode: "InvalidLaunchTemplateId.NotFound", call: func() error {
			_, err := e.ec2.DescribeLaunchTemplates(t.Context(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{"lt-0123456789abcdef0"}})
			return err
		}},
		{name: "unknown version", wantCode: "InvalidLaunchTemplateId.VersionNotFound", call: func() error {
			_, err := e.ec2.DescribeLaunchTemplateVersions(t.Context(), &ec2.DescribeLaunchTemplateVersionsInput{
				LaunchTemplateName: aws.String("versioned"), Versions: []string{"2"}})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, status := apiCode(tt.call()); code != tt.wantCode || status != 400 {
				t.Errorf("error = %s (%d), want %s (400)", code, status, tt.wantCode)
			}
		})
	}
}
