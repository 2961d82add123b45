package ec2sim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// pricingActions are the AWS Price List Query API operations the
// simulator answers (X-Amz-Target: AWSPriceListService.<Operation>).
var pricingActions = map[string]bool{"GetProducts": true}

// pricingPublication is the version and publication date the simulated
// price list reports.
const (
	pricingVersion     = "20261101000000"
	pricingPublication = "2026-11-01T00:00:00Z"
	// onDemandTermCode and onDemandRateCode are the fixed codes AWS uses
	// for the standard on-demand term and its hourly price dimension.
	onDemandTermCode = "JRTCKXETXF"
	onDemandRateCode = "6YS6EN2CT7"
)

// regionLocations are the Price List "location" names of the regions the
// simulator is used with; other regions report their code.
var regionLocations = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-2": "US West (Oregon)",
	"eu-west-1": "EU (Ireland)", "ap-northeast-1": "Asia Pacific (Tokyo)", "ap-south-1": "Asia Pacific (Mumbai)",
	"cn-north-1": "China (Beijing)", "us-gov-west-1": "AWS GovCloud (US-West)", "us-gov-east-1": "AWS GovCloud (US-East)",
}

// usagePrefixes are the usage-type prefixes of those regions (us-east-1
// has none).
var usagePrefixes = map[string]string{
	"us-east-2": "USE2-", "us-west-2": "USW2-", "eu-west-1": "EU-", "ap-northeast-1": "APN1-", "ap-south-1": "APS3-",
	"cn-north-1": "CNN1-", "us-gov-west-1": "UGW1-", "us-gov-east-1": "UGE1-",
}

// priceProduct is one price-list entry before rendering.
type priceProduct struct {
	attrs map[string]string
	sku   string
	price float64
	desc  string
}

// priceProducts lists the region's Compute Instance products for every
// instance type: the Linux, shared-tenancy, used-capacity on-demand
// product a node price comes from, and the look-alikes a client must
// filter away (the same type as an unused capacity reservation, with
// dedicated tenancy at +10%, and with Windows at +0.046 per vCPU-hour).
func (s *Server) priceProducts() []priceProduct {
	loc := regionLocations[s.region]
	if loc == "" {
		loc = s.region
	}
	prefix := usagePrefixes[s.region]
	var out []priceProduct
	for _, name := range s.types.names {
		f := s.types.byName[name]
		od := s.onDemandPrice(f)
		if od == 0 {
			continue
		}
		family := "Compute Instance"
		if f.bareMetal {
			family = "Compute Instance (bare metal)"
		}
		variants := []struct {
			os, tenancy, capacity, usage, operation string
			price                                   float64
		}{
			{"Linux", "Shared", "Used", "BoxUsage:", "RunInstances", od},
			{"Linux", "Shared", "UnusedCapacityReservation", "UnusedBox:", "RunInstances", od},
			{"Linux", "Dedicated", "Used", "DedicatedUsage:", "RunInstances", roundPrice(od * 1.1)},
			{"Windows", "Shared", "Used", "BoxUsage:", "RunInstances:0002", roundPrice(od + 0.046*float64(f.vcpu))},
		}
		for _, v := range variants {
			attrs := map[string]string{
				"servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud", "regionCode": s.region,
				"location": loc, "locationType": "AWS Region", "instanceType": name, "instanceFamily": family,
				"vcpu": strconv.FormatInt(f.vcpu, 10), "memory": memoryGiB(f.memoryMiB), "operatingSystem": v.os,
				"tenancy": v.tenancy, "capacitystatus": v.capacity, "preInstalledSw": "NA",
				"licenseModel": "No License required", "marketoption": "OnDemand", "operation": v.operation,
				"usagetype": prefix + v.usage + name, "currentGeneration": "Yes", "processorArchitecture": "64-bit",
				"availabilityzone": "NA",
			}
			if f.gpuCount > 0 {
				attrs["gpu"] = strconv.FormatInt(f.gpuCount, 10)
			}
			sku := strings.ToUpper(hashHex(strings.Join([]string{s.region, name, v.os, v.tenancy, v.capacity}, "/"), 16))
			out = append(out, priceProduct{attrs: attrs, sku: sku, price: v.price,
				desc: fmt.Sprintf("$%s per On Demand %s %s Instance Hour", strconv.FormatFloat(v.price, 'f', -1, 64), v.os, name)})
		}
	}
	return out
}

// memoryGiB renders memory as the Price List does ("8 GiB", "0.5 GiB").
func memoryGiB(mib int64) string {
	return strconv.FormatFloat(float64(mib)/1024, 'f', -1, 64) + " GiB"
}

// render returns the entry as the JSON string GetProducts puts in its
// PriceList: product (productFamily, attributes, sku), serviceCode, terms
// (OnDemand: offer term → price dimension with pricePerUnit), version and
// publicationDate.
func (p priceProduct) render(currency string) string {
	term := p.sku + "." + onDemandTermCode
	rate := term + "." + onDemandRateCode
	doc := map[string]any{
		"product": map[string]any{
			"productFamily": p.attrs["instanceFamily"],
			"attributes":    p.attrs,
			"sku":           p.sku,
		},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{
			"OnDemand": map[string]any{
				term: map[string]any{
					"priceDimensions": map[string]any{
						rate: map[string]any{
							"unit": "Hrs", "endRange": "Inf", "beginRange": "0", "description": p.desc,
							"appliesTo": []string{}, "rateCode": rate,
							"pricePerUnit": map[string]string{currency: strconv.FormatFloat(p.price, 'f', 10, 64)},
						},
					},
					"sku": p.sku, "effectiveDate": pricingPublication, "offerTermCode": onDemandTermCode,
					"termAttributes": map[string]string{},
				},
			},
		},
		"version":         pricingVersion,
		"publicationDate": pricingPublication,
	}
	b, _ := json.Marshal(doc) // maps of strings and nested maps always marshal
	return string(b)
}

// priceAttr returns the value filter field names in p: product
// attributes by name (case-insensitive, as the Price List API matches
// them), plus productFamily, sku and serviceCode.
func (p priceProduct) priceAttr(field string) (string, bool) {
	switch strings.ToLower(field) {
	case "productfamily":
		return p.attrs["instanceFamily"], true
	case "sku":
		return p.sku, true
	case "servicecode":
		return "AmazonEC2", true
	}
	for k, v := range p.attrs {
		if strings.EqualFold(k, field) {
			return v, true
		}
	}
	return "", false
}

type pricingFilter struct {
	Type  string `json:"Type"`
	Field string `json:"Field"`
	Value string `json:"Value"`
}

// match applies one filter: TERM_MATCH and EQUALS are exact matches,
// CONTAINS a substring, ANY_OF and NONE_OF a comma-separated list; values
// compare case-insensitively. A product without the field never matches.
func (f pricingFilter) match(p priceProduct) bool {
	v, ok := p.priceAttr(f.Field)
	if !ok {
		return false
	}
	switch f.Type {
	case "TERM_MATCH", "EQUALS":
		return strings.EqualFold(v, f.Value)
	case "CONTAINS":
		return strings.Contains(strings.ToLower(v), strings.ToLower(f.Value))
	}
	in := false
	for _, want := range strings.Split(f.Value, ",") {
		if strings.EqualFold(strings.TrimSpace(want), v) {
			in = true
		}
	}
	return in == (f.Type == "ANY_OF")
}

// getProducts follows the Price List Query API GetProducts: ServiceCode
// is required (only AmazonEC2 has products here; other codes fail with
// NotFoundException), Filters narrow the list (each needs a Type of
// TERM_MATCH, EQUALS, CONTAINS, ANY_OF or NONE_OF, a Field and a Value),
// FormatVersion must be aws_v1 when given, MaxResults is 1 to 100
// (default 100) and NextToken pages. PriceList holds one JSON document per
// product, as a string; products are in SKU order.
func (s *Server) getProducts(body []byte) (any, error) {
	var in struct {
		ServiceCode   string          `json:"ServiceCode"`
		Filters       []pricingFilter `json:"Filters"`
		FormatVersion string          `json:"FormatVersion"`
		MaxResults    *int            `json:"MaxResults"`
		NextToken     string          `json:"NextToken"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errorf("SerializationException", "%v", err)
	}
	if in.ServiceCode == "" {
		return nil, errorf("ValidationException", "1 validation error detected: Value null at 'serviceCode' failed to satisfy constraint: Member must not be null")
	}
	if in.ServiceCode != "AmazonEC2" {
		return nil, errorf("NotFoundException", "Service code %s does not exist or has no products in this simulator.", in.ServiceCode)
	}
	if in.FormatVersion != "" && in.FormatVersion != "aws_v1" {
		return nil, errorf("InvalidParameterException", "Input validation error: FormatVersion %s is not supported; use aws_v1.", in.FormatVersion)
	}
	for i, f := range in.Filters {
		switch f.Type {
		case "TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF":
		default:
			return nil, errorf("ValidationException", "1 validation error detected: Value '%s' at 'filters.%d.member.type' failed to satisfy constraint: Member must satisfy enum value set: [TERM_MATCH, EQUALS, CONTAINS, ANY_OF, NONE_OF]", f.Type, i+1)
		}
		if f.Field == "" || f.Value == "" {
			return nil, errorf("ValidationException", "1 validation error detected: filters.%d: Field and Value are required", i+1)
		}
	}
	size := 100
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return nil, errorf("ValidationException", "1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100", *in.MaxResults)
		}
		size = *in.MaxResults
	}
	var hits []priceProduct
	for _, p := range s.priceProducts() {
		ok := true
		for _, f := range in.Filters {
			if !f.match(p) {
				ok = false
				break
			}
		}
		if ok {
			hits = append(hits, p)
		}
	}
	sortProducts(hits)
	start := 0
	if in.NextToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		sku, found := strings.CutPrefix(string(raw), "GetProducts:")
		if err != nil || !found {
			return nil, errorf("InvalidNextTokenException", "The pagination token is invalid. Try again without a pagination token.")
		}
		for start < len(hits) && hits[start].sku <= sku {
			start++
		}
	}
	end := min(start+size, len(hits))
	currency := "USD"
	if strings.HasPrefix(s.region, "cn-") {
		currency = "CNY"
	}
	list := []string{}
	for _, p := range hits[start:end] {
		list = append(list, p.render(currency))
	}
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": list}
	if end < len(hits) {
		out["NextToken"] = base64.RawURLEncoding.EncodeToString([]byte("GetProducts:" + hits[end-1].sku))
	}
	return out, nil
}

func sortProducts(ps []priceProduct) {
	slices.SortFunc(ps, func(a, b priceProduct) int { return strings.Compare(a.sku, b.sku) })
}

// servePricing answers the JSON 1.1 protocol of the AWS Price List Query
// API (X-Amz-Target: AWSPriceListService.<Operation>): GetProducts. Errors
// use the JSON error shape {"__type": code, "message": ...}, the
// X-Amzn-ErrorType header and HTTP 400 (ThrottlingException: 400 too, as
// the Price List API sends it).
func (s *Server) servePricing(w http.ResponseWriter, r *http.Request) {
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AWSPriceListService.")
	body, readErr := io.ReadAll(io.LimitReader(r.Body, 1<<20))

	s.mu.Lock()
	defer s.unlock()
	now := s.clock.Now()
	s.advance(now)
	call := Call{Service: "pricing", Action: action, Time: now, Body: body}

	var out any
	err := readErr
	if err == nil {
		err = s.takeInjected(action)
	}
	if err == nil {
		if pricingActions[action] {
			out, err = s.getProducts(body)
		} else {
			err = errorf("UnknownOperationException", "Operation %s is not supported by the simulator.", action)
		}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", s.newUUID("request"))
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{Code: "InternalErrorException", Message: err.Error()}
		}
		call.ErrorCode = ae.Code
		s.calls = append(s.calls, call)
		status := httpStatus(ae.Code)
		if ae.Code == "ThrottlingException" || ae.Code == "RequestLimitExceeded" {
			status = http.StatusBadRequest
		}
		w.Header().Set("X-Amzn-ErrorType", ae.Code)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": ae.Code, "message": ae.Message})
		return
	}
	s.calls = append(s.calls, call)
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(out)
}
