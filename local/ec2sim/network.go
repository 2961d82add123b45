package ec2sim

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// subnet is one seeded subnet.
type subnet struct {
	id, zone, zoneID string
	cidr             netip.Prefix
	public           bool
	tags             map[string]string
	available        int      // free addresses as DescribeSubnets reports them
	next             uint32   // next never-used host offset
	free             []uint32 // host offsets returned by terminated instances
}

// securityGroup is one seeded security group.
type securityGroup struct {
	id, name, description string
	tags                  map[string]string
}

// Subnet describes a subnet of the simulated VPC.
type Subnet struct {
	ID     string `json:"id"`
	Zone   string `json:"zone"`
	ZoneID string `json:"zoneId"`
	CIDR   string `json:"cidr"`
	// Public subnets map public IPs on launch and carry
	// kubernetes.io/role/elb; private ones carry karpenter.sh/discovery.
	Public       bool              `json:"public"`
	AvailableIPs int               `json:"availableIps"`
	Tags         map[string]string `json:"tags"`
}

// SecurityGroup describes a security group of the simulated VPC.
type SecurityGroup struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Tags        map[string]string `json:"tags"`
}

// Network describes the seeded VPC.
type Network struct {
	VPCID          string          `json:"vpcId"`
	CIDR           string          `json:"cidr"`
	Subnets        []Subnet        `json:"subnets"`
	SecurityGroups []SecurityGroup `json:"securityGroups"`
}

// seedNetwork creates the VPC 10.0.0.0/16 with, per zone i, a private
// /20 subnet at 10.0.16i.0 tagged karpenter.sh/discovery=<cluster> and a
// public /22 subnet at 10.0.(128+4i).0, plus the VPC's default security
// group, the EKS cluster security group and a node security group tagged
// for discovery — the layout of the Karpenter getting-started guide.
func (s *Server) seedNetwork() {
	s.vpcID = "vpc-" + hashHex("vpc/"+s.clusterName, 17)
	s.vpcCIDR = "10.0.0.0/16"
	for _, z := range s.zones {
		priv := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(16 * z.index), 0}), 20)
		s.subnets = append(s.subnets, &subnet{
			id: "subnet-" + hashHex("subnet/private/"+z.name, 17), zone: z.name, zoneID: z.id, cidr: priv,
			tags: map[string]string{
				"Name":                            s.clusterName + "-private-" + z.name,
				"karpenter.sh/discovery":          s.clusterName,
				"kubernetes.io/role/internal-elb": "1",
			},
			available: subnetCapacity(priv),
		})
	}
	for _, z := range s.zones {
		pub := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(128 + 4*z.index), 0}), 22)
		s.subnets = append(s.subnets, &subnet{
			id: "subnet-" + hashHex("subnet/public/"+z.name, 17), zone: z.name, zoneID: z.id, cidr: pub, public: true,
			tags: map[string]string{
				"Name":                   s.clusterName + "-public-" + z.name,
				"kubernetes.io/role/elb": "1",
			},
			available: subnetCapacity(pub),
		})
	}
	clusterSG := "eks-cluster-sg-" + s.clusterName + "-" + hashHex("cluster-sg-name/"+s.clusterName, 10)
	s.groups = []*securityGroup{
		{id: "sg-" + hashHex("sg/default/"+s.clusterName, 17), name: "default", description: "default VPC security group", tags: map[string]string{}},
		{id: "sg-" + hashHex("sg/cluster/"+s.clusterName, 17), name: clusterSG,
			description: "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads.",
			tags: map[string]string{
				"Name":                                   clusterSG,
				"aws:eks:cluster-name":                   s.clusterName,
				"kubernetes.io/cluster/" + s.clusterName: "owned",
			}},
		{id: "sg-" + hashHex("sg/node/"+s.clusterName, 17), name: s.clusterName + "-node", description: "Communication between all nodes in the cluster",
			tags: map[string]string{
				"Name":                   s.clusterName + "-node",
				"karpenter.sh/discovery": s.clusterName,
			}},
	}
}

// subnetCapacity is the usable address count: AWS reserves 5 addresses
// per subnet.
func subnetCapacity(p netip.Prefix) int { return 1<<(32-p.Bits()) - 5 }

// allocateIP hands out a private address of sn: the next never-used one
// while there is one, then released ones, oldest release first, so a
// Node name (the private DNS name) is not reused minutes after its node
// went away, which would mix two machines under one name in events and
// timelines. The first four addresses of a subnet are reserved by AWS. ok
// is false when the subnet has no free address.
func (sn *subnet) allocateIP() (ip string, ok bool) {
	var off uint32
	switch {
	case sn.available <= 0:
		return "", false
	case int(sn.next) < subnetCapacity(sn.cidr):
		off = sn.next
		sn.next++
	case len(sn.free) > 0:
		off, sn.free = sn.free[0], sn.free[1:]
	default:
		return "", false
	}
	sn.available--
	base := sn.cidr.Addr().As4()
	n := (uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])) + 4 + off
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String(), true
}

// releaseIP returns an address handed out by allocateIP.
func (sn *subnet) releaseIP(ip string) {
	addr, err := netip.ParseAddr(ip)
	if err != nil || !sn.cidr.Contains(addr) {
		return
	}
	a, b := addr.As4(), sn.cidr.Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	sn.free = append(sn.free, n-base-4)
	sn.available++
}

// SetAvailableIPs sets the free-address count DescribeSubnets reports for a
// subnet, as if other workloads held addresses; 0 makes CreateFleet fail its
// overrides with InsufficientFreeAddressesInSubnet. It fails for an unknown
// subnet or a count outside [0, subnet size − 5].
func (s *Server) SetAvailableIPs(subnetID string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.subnetByID(subnetID)
	if sn == nil {
		return fmt.Errorf("subnet %s: not found", subnetID)
	}
	if n < 0 || n > subnetCapacity(sn.cidr) {
		return fmt.Errorf("subnet %s: %d free addresses, want 0 to %d", subnetID, n, subnetCapacity(sn.cidr))
	}
	sn.available = n
	return nil
}

func (s *Server) subnetByID(id string) *subnet {
	for _, sn := range s.subnets {
		if sn.id == id {
			return sn
		}
	}
	return nil
}

func (s *Server) groupByID(id string) *securityGroup {
	for _, g := range s.groups {
		if g.id == id {
			return g
		}
	}
	return nil
}

// Network returns the seeded VPC, subnets (private ones first, in zone
// order) and security groups, with current free-address counts.
func (s *Server) Network() Network {
	s.mu.Lock()
	defer s.unlock()
	s.advance(s.clock.Now())
	n := Network{VPCID: s.vpcID, CIDR: s.vpcCIDR}
	for _, sn := range s.subnets {
		n.Subnets = append(n.Subnets, Subnet{ID: sn.id, Zone: sn.zone, ZoneID: sn.zoneID, CIDR: sn.cidr.String(),
			Public: sn.public, AvailableIPs: sn.available, Tags: maps.Clone(sn.tags)})
	}
	for _, g := range s.groups {
		n.SecurityGroups = append(n.SecurityGroups, SecurityGroup{ID: g.id, Name: g.name, Description: g.description, Tags: maps.Clone(g.tags)})
	}
	return n
}

type subnetXML struct {
	SubnetID                    string   `xml:"subnetId"`
	SubnetArn                   string   `xml:"subnetArn"`
	State                       string   `xml:"state"`
	VpcID                       string   `xml:"vpcId"`
	OwnerID                     string   `xml:"ownerId"`
	CidrBlock                   string   `xml:"cidrBlock"`
	AvailableIPAddressCount     int      `xml:"availableIpAddressCount"`
	AvailabilityZone            string   `xml:"availabilityZone"`
	AvailabilityZoneID          string   `xml:"availabilityZoneId"`
	DefaultForAz                bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch         bool     `xml:"mapPublicIpOnLaunch"`
	AssignIpv6AddressOnCreation bool     `xml:"assignIpv6AddressOnCreation"`
	Ipv6Native                  bool     `xml:"ipv6Native"`
	TagSet                      []tagXML `xml:"tagSet>item,omitempty"`
}

type describeSubnetsResponse struct {
	respHeader
	Subnets   []subnetXML `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

// describeSubnets follows EC2 DescribeSubnets: SubnetId.N (an unknown ID
// fails the call with InvalidSubnetID.NotFound) and filters.
func (s *Server) describeSubnets(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"subnet-id", "vpc-id", "availability-zone", "availability-zone-id",
		"state", "cidr-block", "cidr", "default-for-az", "map-public-ip-on-launch", "owner-id", "subnet-arn"}, true)
	if err != nil {
		return nil, err
	}
	ids := q.strs("SubnetId")
	for _, id := range ids {
		if s.subnetByID(id) == nil {
			return nil, errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	var out []subnetXML
	for _, sn := range s.subnets {
		if len(ids) > 0 && !slices.Contains(ids, sn.id) {
			continue
		}
		arn := fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", s.region, s.accountID, sn.id)
		field := func(name string) []string {
			switch name {
			case "subnet-id":
				return []string{sn.id}
			case "vpc-id":
				return []string{s.vpcID}
			case "availability-zone":
				return []string{sn.zone}
			case "availability-zone-id":
				return []string{sn.zoneID}
			case "state":
				return []string{"available"}
			case "cidr-block", "cidr":
				return []string{sn.cidr.String()}
			case "default-for-az":
				return boolStr(false)
			case "map-public-ip-on-launch":
				return boolStr(sn.public)
			case "owner-id":
				return []string{s.accountID}
			case "subnet-arn":
				return []string{arn}
			}
			return nil
		}
		if !matches(filters, sn.tags, field) {
			continue
		}
		out = append(out, subnetXML{
			SubnetID: sn.id, SubnetArn: arn, State: "available", VpcID: s.vpcID, OwnerID: s.accountID,
			CidrBlock: sn.cidr.String(), AvailableIPAddressCount: sn.available, AvailabilityZone: sn.zone,
			AvailabilityZoneID: sn.zoneID, MapPublicIPOnLaunch: sn.public, TagSet: tagSet(sn.tags),
		})
	}
	p, err := paginate(q, "DescribeSubnets", len(out), 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	return &describeSubnetsResponse{Subnets: out[p.start:p.end], NextToken: p.next}, nil
}

type ipRangeXML struct {
	CidrIP string `xml:"cidrIp"`
}

type ipPermissionXML struct {
	IPProtocol string       `xml:"ipProtocol"`
	IPRanges   []ipRangeXML `xml:"ipRanges>item"`
}

type securityGroupXML struct {
	OwnerID             string            `xml:"ownerId"`
	GroupID             string            `xml:"groupId"`
	GroupName           string            `xml:"groupName"`
	GroupDescription    string            `xml:"groupDescription"`
	VpcID               string            `xml:"vpcId"`
	SecurityGroupArn    string            `xml:"securityGroupArn"`
	IPPermissions       []ipPermissionXML `xml:"ipPermissions>item"`
	IPPermissionsEgress []ipPermissionXML `xml:"ipPermissionsEgress>item"`
	TagSet              []tagXML          `xml:"tagSet>item,omitempty"`
}

type describeSecurityGroupsResponse struct {
	respHeader
	Groups    []securityGroupXML `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

// describeSecurityGroups follows EC2 DescribeSecurityGroups: GroupId.N and
// GroupName.N (unknown ones fail with InvalidGroup.NotFound) and filters.
func (s *Server) describeSecurityGroups(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"group-id", "group-name", "vpc-id", "description", "owner-id"}, true)
	if err != nil {
		return nil, err
	}
	ids, names := q.strs("GroupId"), q.strs("GroupName")
	for _, id := range ids {
		if s.groupByID(id) == nil {
			return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, name := range names {
		if !slices.ContainsFunc(s.groups, func(g *securityGroup) bool { return g.name == name }) {
			return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, s.vpcID)
		}
	}
	var out []securityGroupXML
	for _, g := range s.groups {
		if len(ids) > 0 && !slices.Contains(ids, g.id) || len(names) > 0 && !slices.Contains(names, g.name) {
			continue
		}
		field := func(name string) []string {
			switch name {
			case "group-id":
				return []string{g.id}
			case "group-name":
				return []string{g.name}
			case "vpc-id":
				return []string{s.vpcID}
			case "description":
				return []string{g.description}
			case "owner-id":
				return []string{s.accountID}
			}
			return nil
		}
		if !matches(filters, g.tags, field) {
			continue
		}
		out = append(out, securityGroupXML{
			OwnerID: s.accountID, GroupID: g.id, GroupName: g.name, GroupDescription: g.description, VpcID: s.vpcID,
			SecurityGroupArn:    fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", s.region, s.accountID, g.id),
			IPPermissionsEgress: []ipPermissionXML{{IPProtocol: "-1", IPRanges: []ipRangeXML{{CidrIP: "0.0.0.0/0"}}}},
			TagSet:              tagSet(g.tags),
		})
	}
	p, err := paginate(q, "DescribeSecurityGroups", len(out), 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	return &describeSecurityGroupsResponse{Groups: out[p.start:p.end], NextToken: p.next}, nil
}

type availabilityZoneXML struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
	OptInStatus        string `xml:"optInStatus"`
	ZoneType           string `xml:"zoneType"`
}

type describeAvailabilityZonesResponse struct {
	respHeader
	Zones []availabilityZoneXML `xml:"availabilityZoneInfo>item"`
}

// describeAvailabilityZones lists the configured zones (ZoneName.N,
// ZoneId.N and filters zone-name, zone-id, region-name, state, zone-type).
func (s *Server) describeAvailabilityZones(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"zone-name", "zone-id", "region-name", "state", "zone-type", "group-name"}, false)
	if err != nil {
		return nil, err
	}
	names, ids := q.strs("ZoneName"), q.strs("ZoneId")
	var out []availabilityZoneXML
	for _, z := range s.zones {
		if len(names) > 0 && !slices.Contains(names, z.name) || len(ids) > 0 && !slices.Contains(ids, z.id) {
			continue
		}
		field := func(name string) []string {
			switch name {
			case "zone-name":
				return []string{z.name}
			case "zone-id":
				return []string{z.id}
			case "region-name", "group-name":
				return []string{s.region}
			case "state":
				return []string{"available"}
			case "zone-type":
				return []string{"availability-zone"}
			}
			return nil
		}
		if !matches(filters, nil, field) {
			continue
		}
		out = append(out, availabilityZoneXML{ZoneName: z.name, ZoneID: z.id, ZoneState: "available", RegionName: s.region,
			GroupName: s.region, NetworkBorderGroup: s.region, OptInStatus: "opt-in-not-required", ZoneType: "availability-zone"})
	}
	for _, n := range names {
		if _, ok := s.zoneByName(n); !ok {
			return nil, invalidParameterValue("The zone '%s' does not exist.", n)
		}
	}
	return &describeAvailabilityZonesResponse{Zones: out}, nil
}

// privateDNSName is EC2's private host name for an address:
// ip-10-0-0-4.ec2.internal in us-east-1, ip-10-0-0-4.<region>.compute.internal
// elsewhere.
func (s *Server) privateDNSName(ip string) string {
	host := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if s.region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + s.region + ".compute.internal"
}
