package ec2sim

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

type describeInstanceTypesResponse struct {
	respHeader
	InstanceTypes []instanceTypeXML `xml:"instanceTypeSet>item"`
	NextToken     string            `xml:"nextToken,omitempty"`
}

// describeInstanceTypes follows EC2 DescribeInstanceTypes over the embedded
// catalog: InstanceType.N (unknown types fail with InvalidInstanceType),
// filters, and pages of at most 100 (MaxResults 5 to 100), sorted by name.
func (s *Server) describeInstanceTypes(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"instance-type", "processor-info.supported-architecture",
		"supported-virtualization-type", "current-generation", "bare-metal", "hypervisor", "vcpu-info.default-vcpus",
		"memory-info.size-in-mib", "burstable-performance-supported", "supported-usage-class", "instance-storage-supported",
		"network-info.efa-supported", "free-tier-eligible"}, false)
	if err != nil {
		return nil, err
	}
	names := q.strs("InstanceType")
	var missing []string
	for _, n := range names {
		if s.types.byName[n] == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, errorf("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
	}
	var hits []*typeFacts
	for _, name := range s.types.names {
		if len(names) > 0 && !slices.Contains(names, name) {
			continue
		}
		f := s.types.byName[name]
		field := func(filter string) []string {
			switch filter {
			case "instance-type":
				return []string{f.name}
			case "processor-info.supported-architecture":
				return []string{f.arch}
			case "supported-virtualization-type":
				return []string{"hvm"}
			case "current-generation":
				return boolStr(true)
			case "bare-metal":
				return boolStr(f.bareMetal)
			case "hypervisor":
				return []string{f.hypervisor}
			case "vcpu-info.default-vcpus":
				return []string{strconv.FormatInt(f.vcpu, 10)}
			case "memory-info.size-in-mib":
				return []string{strconv.FormatInt(f.memoryMiB, 10)}
			case "burstable-performance-supported":
				return boolStr(f.burstable)
			case "supported-usage-class":
				return []string{"on-demand", "spot"}
			case "instance-storage-supported":
				return boolStr(f.nvmeGB > 0)
			case "network-info.efa-supported":
				return boolStr(f.efa > 0)
			case "free-tier-eligible":
				return boolStr(f.name == "t2.micro" || f.name == "t3.micro")
			}
			return nil
		}
		if matches(filters, nil, field) {
			hits = append(hits, f)
		}
	}
	p, err := paginate(q, "DescribeInstanceTypes", len(hits), 5, 100, 100)
	if err != nil {
		return nil, err
	}
	resp := &describeInstanceTypesResponse{NextToken: p.next}
	for _, f := range hits[p.start:p.end] {
		resp.InstanceTypes = append(resp.InstanceTypes, f.xml())
	}
	return resp, nil
}

type instanceTypeOfferingXML struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeInstanceTypeOfferingsResponse struct {
	respHeader
	Offerings []instanceTypeOfferingXML `xml:"instanceTypeOfferingSet>item"`
	NextToken string                    `xml:"nextToken,omitempty"`
}

// describeInstanceTypeOfferings follows EC2 DescribeInstanceTypeOfferings:
// LocationType region (default), availability-zone or availability-zone-id;
// filters location and instance-type; MaxResults 5 to 1000 (default 1000)
// and NextToken page it. A zone lists the types it offers (Offered: all of
// them in a uniform world); the region lists every type.
func (s *Server) describeInstanceTypeOfferings(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"location", "instance-type"}, false)
	if err != nil {
		return nil, err
	}
	locType := cmp.Or(q.str("LocationType"), "region")
	var locations []string
	switch locType {
	case "region":
		locations = []string{s.region}
	case "availability-zone":
		locations = s.zoneNames()
	case "availability-zone-id":
		for _, z := range s.zones {
			locations = append(locations, z.id)
		}
	default:
		return nil, invalidParameterValue("Value (%s) for parameter locationType is invalid.", locType)
	}
	var out []instanceTypeOfferingXML
	for _, name := range s.types.names {
		for i, loc := range locations {
			if locType != "region" && !s.offeredIn(name, s.zones[i].name) {
				continue
			}
			field := func(filter string) []string {
				if filter == "location" {
					return []string{loc}
				}
				return []string{name}
			}
			if matches(filters, nil, field) {
				out = append(out, instanceTypeOfferingXML{InstanceType: name, LocationType: locType, Location: loc})
			}
		}
	}
	p, err := paginate(q, "DescribeInstanceTypeOfferings", len(out), 5, 1000, 1000)
	if err != nil {
		return nil, err
	}
	return &describeInstanceTypeOfferingsResponse{Offerings: out[p.start:p.end], NextToken: p.next}, nil
}

type spotPriceXML struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

type describeSpotPriceHistoryResponse struct {
	respHeader
	Prices    []spotPriceXML `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

// describeSpotPriceHistory follows EC2 DescribeSpotPriceHistory: for every
// offered (instance type, zone) pool, the price changes between StartTime
// and EndTime (ISO 8601; EndTime defaults to now, StartTime to the start
// of the simulator's history) plus the price in effect at StartTime,
// newest first, for product Linux/UNIX. InstanceType.N,
// ProductDescription.N, AvailabilityZone and the filters instance-type,
// availability-zone, product-description, spot-price and timestamp narrow
// it; MaxResults (5 to 1000, default 1000) and NextToken page it.
func (s *Server) describeSpotPriceHistory(q *qnode, now time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"instance-type", "availability-zone", "product-description", "spot-price", "timestamp"}, false)
	if err != nil {
		return nil, err
	}
	start, end := s.born, now
	for _, tp := range []struct {
		name string
		dst  *time.Time
	}{{"StartTime", &start}, {"EndTime", &end}} {
		if v := q.str(tp.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return nil, invalidParameterValue("Value (%s) for parameter %s is invalid. Expecting an ISO 8601 date-time.", v, strings.ToLower(tp.name[:1])+tp.name[1:])
			}
			*tp.dst = t
		}
	}
	if end.After(now) {
		end = now
	}
	types, products, zoneName := q.strs("InstanceType"), q.strs("ProductDescription"), q.str("AvailabilityZone")
	if len(products) > 0 && !slices.Contains(products, "Linux/UNIX") && !slices.Contains(products, "Linux/UNIX (Amazon VPC)") {
		return &describeSpotPriceHistoryResponse{}, nil
	}
	var out []spotPriceXML
	for _, name := range s.types.names {
		if len(types) > 0 && !slices.Contains(types, name) {
			continue
		}
		f := s.types.byName[name]
		for _, z := range s.zones {
			if zoneName != "" && z.name != zoneName || !s.offeredIn(name, z.name) {
				continue
			}
			for _, pt := range s.spotHistory(f, z.name, start, end) {
				price := strconv.FormatFloat(pt.price, 'f', 6, 64)
				ts := timestamp(pt.at)
				field := func(filter string) []string {
					switch filter {
					case "instance-type":
						return []string{name}
					case "availability-zone":
						return []string{z.name}
					case "product-description":
						return []string{"Linux/UNIX"}
					case "spot-price":
						return []string{price}
					case "timestamp":
						return []string{ts}
					}
					return nil
				}
				if matches(filters, nil, field) {
					out = append(out, spotPriceXML{AvailabilityZone: z.name, AvailabilityZoneID: z.id, InstanceType: name,
						ProductDescription: "Linux/UNIX", SpotPrice: price, Timestamp: ts})
				}
			}
		}
	}
	// Newest first (the timestamp format sorts as text); ties keep type
	// and zone order.
	slices.SortStableFunc(out, func(a, b spotPriceXML) int { return strings.Compare(b.Timestamp, a.Timestamp) })
	p, err := paginate(q, "DescribeSpotPriceHistory", len(out), 5, 1000, 1000)
	if err != nil {
		return nil, err
	}
	return &describeSpotPriceHistoryResponse{Prices: out[p.start:p.end], NextToken: p.next}, nil
}
