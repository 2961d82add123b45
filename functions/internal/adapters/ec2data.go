package adapters

import (
	"context"
	"time"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// EC2Data is provisioning.EC2DataSource (and the refresher's store) over
// the DynamoDB store, for one region.
type EC2Data struct {
	Store  *ddbstore.Store
	Region string
}

var _ provisioning.EC2DataSource = EC2Data{}

// EC2Data reads the stored parts (ddbstore.Store.EC2Data).
func (e EC2Data) EC2Data(ctx context.Context, now time.Time) (catalog.LiveData, error) {
	return e.Store.EC2Data(ctx, e.Region, now)
}

// PutEC2Data stores the parts d holds (ddbstore.Store.PutEC2Data).
func (e EC2Data) PutEC2Data(ctx context.Context, d catalog.LiveData) error {
	return e.Store.PutEC2Data(ctx, d)
}
