package ec2sim

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Placement group strategies and states (EC2 PlacementStrategy,
// PlacementGroupState).
const (
	PlacementCluster   = "cluster"
	PlacementPartition = "partition"
	PlacementSpread    = "spread"

	PlacementGroupAvailable = "available"
	PlacementGroupPending   = "pending"
	PlacementGroupDeleting  = "deleting"
	PlacementGroupDeleted   = "deleted"
)

// maxPartitions is EC2's limit of partitions per partition placement group.
const maxPartitions = 7

// PlacementGroup is a placement group of the simulated account, as
// AddPlacementGroup takes it and DescribePlacementGroups answers it.
type PlacementGroup struct {
	// ID is "pg-" and 17 hex digits; AddPlacementGroup assigns it when "".
	ID   string `json:"id"`
	Name string `json:"name"`
	// Strategy is cluster, partition or spread.
	Strategy string `json:"strategy"`
	// PartitionCount is 1..7 for partition groups, 0 otherwise
	// (AddPlacementGroup defaults a partition group to 2, as EC2 does).
	PartitionCount int `json:"partitionCount"`
	// State is pending, available, deleting or deleted; "" means available.
	State string            `json:"state"`
	Tags  map[string]string `json:"tags"`
}

// AddPlacementGroup seeds a placement group and returns it with its ID and
// defaults. Errors, as CreatePlacementGroup's: an empty or duplicate name
// (InvalidPlacementGroup.Duplicate), an unknown strategy or state, or a
// partition count on a non-partition group or outside 1..7
// (InvalidParameterValue).
func (s *Server) AddPlacementGroup(pg PlacementGroup) (PlacementGroup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case pg.Name == "":
		return PlacementGroup{}, missingParameter("GroupName")
	case slices.ContainsFunc(s.placementGroups, func(g *PlacementGroup) bool { return g.Name == pg.Name }):
		return PlacementGroup{}, errorf("InvalidPlacementGroup.Duplicate", "The Placement Group '%s' already exists.", pg.Name)
	case !slices.Contains([]string{PlacementCluster, PlacementPartition, PlacementSpread}, pg.Strategy):
		return PlacementGroup{}, invalidParameterValue("Value (%s) for parameter strategy is invalid. Valid values are cluster, spread, partition.", pg.Strategy)
	case pg.Strategy != PlacementPartition && pg.PartitionCount != 0:
		return PlacementGroup{}, invalidParameterValue("PartitionCount is only supported for the partition strategy.")
	case pg.Strategy == PlacementPartition && (pg.PartitionCount < 0 || pg.PartitionCount > maxPartitions):
		return PlacementGroup{}, invalidParameterValue("Value (%d) for parameter partitionCount is invalid. Expecting a value between 1 and %d.", pg.PartitionCount, maxPartitions)
	}
	if pg.Strategy == PlacementPartition && pg.PartitionCount == 0 {
		pg.PartitionCount = 2
	}
	if pg.State == "" {
		pg.State = PlacementGroupAvailable
	}
	if !slices.Contains([]string{PlacementGroupPending, PlacementGroupAvailable, PlacementGroupDeleting, PlacementGroupDeleted}, pg.State) {
		return PlacementGroup{}, invalidParameterValue("Value (%s) for parameter state is invalid.", pg.State)
	}
	if pg.ID == "" {
		pg.ID = s.newID("pg")
	}
	pg.Tags = maps.Clone(pg.Tags)
	g := pg
	s.placementGroups = append(s.placementGroups, &g)
	return pg, nil
}

// placementGroup finds a group by ID or name ("" for either means unset).
func (s *Server) placementGroup(id, name string) *PlacementGroup {
	for _, g := range s.placementGroups {
		if id != "" && g.ID == id || id == "" && name != "" && g.Name == name {
			return g
		}
	}
	return nil
}

type placementGroupXML struct {
	GroupName      string   `xml:"groupName"`
	State          string   `xml:"state"`
	Strategy       string   `xml:"strategy"`
	PartitionCount int      `xml:"partitionCount,omitempty"`
	GroupID        string   `xml:"groupId"`
	TagSet         []tagXML `xml:"tagSet>item,omitempty"`
	GroupArn       string   `xml:"groupArn"`
	SpreadLevel    string   `xml:"spreadLevel,omitempty"`
}

type describePlacementGroupsResponse struct {
	respHeader
	Groups []placementGroupXML `xml:"placementGroupSet>item"`
}

// describePlacementGroups answers DescribePlacementGroups: GroupName.N and
// GroupId.N (an unknown one fails the call with
// InvalidPlacementGroup.Unknown), Filter.N on group-name, group-arn, state,
// strategy, spread-level, tag:<key> and tag-key. There is no pagination,
// as in EC2. Groups in state deleted are listed only when asked for by
// name or id.
func (s *Server) describePlacementGroups(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"group-name", "group-arn", "state", "strategy", "spread-level"}, true)
	if err != nil {
		return nil, err
	}
	ids, names := q.strs("GroupId"), q.strs("GroupName")
	for _, id := range ids {
		if s.placementGroup(id, "") == nil {
			return nil, errorf("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", id)
		}
	}
	for _, name := range names {
		if s.placementGroup("", name) == nil {
			return nil, errorf("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", name)
		}
	}
	out := &describePlacementGroupsResponse{}
	for _, g := range s.placementGroups {
		asked := slices.Contains(ids, g.ID) || slices.Contains(names, g.Name)
		if (len(ids) > 0 || len(names) > 0) && !asked || !asked && g.State == PlacementGroupDeleted {
			continue
		}
		arn := fmt.Sprintf("arn:aws:ec2:%s:%s:placement-group/%s", s.region, s.accountID, g.Name)
		spread := ""
		if g.Strategy == PlacementSpread {
			spread = "rack"
		}
		field := func(name string) []string {
			switch name {
			case "group-name":
				return []string{g.Name}
			case "group-arn":
				return []string{arn}
			case "state":
				return []string{g.State}
			case "strategy":
				return []string{g.Strategy}
			case "spread-level":
				return []string{spread}
			}
			return nil
		}
		if !matches(filters, g.Tags, field) {
			continue
		}
		out.Groups = append(out.Groups, placementGroupXML{GroupName: g.Name, State: g.State, Strategy: g.Strategy, PartitionCount: g.PartitionCount,
			GroupID: g.ID, TagSet: tagSet(g.Tags), GroupArn: arn, SpreadLevel: spread})
	}
	return out, nil
}

// placeInGroup resolves the launch template's placement group for an
// instance launching now: the group (nil when the template names none) and
// the partition of a partition group (the template's PartitionNumber, else
// the partition holding the fewest live instances of the group, lowest
// first, as EC2 spreads them). Errors: an unknown, deleting or deleted
// group (InvalidPlacementGroup.Unknown), or a partition number on a
// non-partition group or outside the group's partitions
// (InvalidParameterValue).
func (s *Server) placeInGroup(d ltData) (*PlacementGroup, int, error) {
	if d.groupID == "" && d.groupName == "" {
		return nil, 0, nil
	}
	g := s.placementGroup(d.groupID, d.groupName)
	if g == nil || g.State == PlacementGroupDeleted || g.State == PlacementGroupDeleting {
		return nil, 0, errorf("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", firstNonEmpty(d.groupID, d.groupName))
	}
	if g.Strategy != PlacementPartition {
		if d.partition != 0 {
			return nil, 0, invalidParameterValue("PartitionNumber is only supported for partition placement groups.")
		}
		return g, 0, nil
	}
	if d.partition != 0 {
		if d.partition < 1 || d.partition > g.PartitionCount {
			return nil, 0, invalidParameterValue("The partition number %d is not valid for placement group '%s' with %d partitions.", d.partition, g.Name, g.PartitionCount)
		}
		return g, d.partition, nil
	}
	count := make([]int, g.PartitionCount+1)
	for _, in := range s.instances {
		if in.placementGroupID == g.ID && in.state != StateTerminated && in.partition > 0 && in.partition <= g.PartitionCount {
			count[in.partition]++
		}
	}
	best := 1
	for p := 2; p <= g.PartitionCount; p++ {
		if count[p] < count[best] {
			best = p
		}
	}
	return g, best, nil
}

// clusterGroupZone is the zone of the cluster placement group the launch
// template names: that of its live (not terminated) instances; "" when
// the template names no cluster group or the group is empty (its first
// instance may go to any zone).
func (s *Server) clusterGroupZone(d ltData) string {
	g, _, err := s.placeInGroup(d)
	if err != nil || g == nil || g.Strategy != PlacementCluster {
		return ""
	}
	for _, in := range s.instances {
		if in.placementGroupID == g.ID && in.state != StateTerminated {
			return in.zone
		}
	}
	return ""
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
