package catalog

import (
	"errors"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// PriceSource says where prices came from, for output that must state it.
type PriceSource struct {
	// Description, e.g. "embedded on-demand price table for us-east-1 (generated 2026-07-20)".
	Description string
}

// Resolve returns the instance types of the embedded catalog as they would
// launch with nodeClass: capacity and overhead per its AMI family and kubelet
// settings, offerings per zone and capacity type with prices.
func Resolve(nodeClass *v1.EC2NodeClass, opts Options) ([]*InstanceType, PriceSource, error) {
	return nil, PriceSource{}, errors.New("catalog: not implemented")
}
