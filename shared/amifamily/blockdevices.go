package amifamily

import (
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// DefaultBlockDeviceMappings returns the volumes a launch template gets when
// spec.blockDeviceMappings is empty (karpenter-spec §4 step 6; aws:
// pkg/providers/amifamily/{al2,al2023,bottlerocket,windows,custom}.go):
//   - AL2, AL2023: /dev/xvda 20Gi
//   - Bottlerocket: /dev/xvda 4Gi (OS) and /dev/xvdb 20Gi (containers, pods)
//   - Windows: /dev/sda1 50Gi
//   - Custom: none (the AMI's own mappings apply)
//
// Every volume is gp3, encrypted and deleted on termination. The result is a
// new slice the caller owns.
func (f Family) DefaultBlockDeviceMappings() []*v1.BlockDeviceMapping {
	switch f {
	case AL2, AL2023:
		return []*v1.BlockDeviceMapping{gp3("/dev/xvda", 20)}
	case Bottlerocket:
		return []*v1.BlockDeviceMapping{gp3("/dev/xvda", 4), gp3("/dev/xvdb", 20)}
	case Windows2019, Windows2022, Windows2025:
		return []*v1.BlockDeviceMapping{gp3("/dev/sda1", 50)}
	}
	return nil
}

// EphemeralDevice is the device whose volume backs ephemeral-storage
// (karpenter-spec §3.5): /dev/xvda for AL2/AL2023, /dev/xvdb for
// Bottlerocket, /dev/sda1 for Windows, "" for Custom.
func (f Family) EphemeralDevice() string {
	switch f {
	case AL2, AL2023:
		return "/dev/xvda"
	case Bottlerocket:
		return "/dev/xvdb"
	case Windows2019, Windows2022, Windows2025:
		return "/dev/sda1"
	}
	return ""
}

func gp3(device string, gi int64) *v1.BlockDeviceMapping {
	size := *resource.NewQuantity(gi<<30, resource.BinarySI)
	return &v1.BlockDeviceMapping{
		DeviceName: &device,
		EBS: &v1.BlockDevice{
			DeleteOnTermination: ptr(true),
			Encrypted:           ptr(true),
			VolumeSize:          &size,
			VolumeType:          ptr("gp3"),
		},
	}
}

func ptr[T any](v T) *T { return &v }
