package main

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the versions of one API this broker serves.
type versionRange struct{ min, max int16 }

// supported is what ApiVersions advertises, and what handleRaw accepts.
// Each range is the versions whose fields the handlers read and fill:
//   - Produce from 0 to 11 (12 is KIP-890's transaction verification, 13
//     names topics by id). Only magic v2 batches are taken (from v3 on),
//     but 0 is advertised: librdkafka enables gzip, snappy and lz4 only
//     when the broker lists Produce v0, and otherwise sends those
//     batches uncompressed without a word. A v0-v2 request's magic 0
//     or 1 message set is refused with UNSUPPORTED_VERSION;
//   - Fetch from 4 (isolation level, last stable offset) to 12 (13 names
//     topics by id);
//   - ListOffsets from 1 to 9 (7: KIP-734's MAX_TIMESTAMP; 8: KIP-405's
//     earliest-local; 9: KIP-1005's latest-tiered; 10 is KIP-1075's
//     remote lookup timeout);
//   - Metadata from 1 (a null topic list means all) to 12;
//   - InitProducerId 0 to 4 (idempotent and transactional producers);
//   - CreateTopics 2 to 7;
//   - FindCoordinator 0 to 4 (every key: this broker);
//   - AddPartitionsToTxn 0 to 3 (4 and later are KIP-890's broker-to-broker
//     batches), EndTxn 0 to 4 (5 is KIP-890 part 2's epoch bump);
//   - OffsetCommit 2 to 9 (Kafka 4 dropped 0 and 1; 10 names topics by id);
//   - OffsetFetch 1 to 9 (8 asks for several groups; 10 names topics by id);
//   - OffsetForLeaderEpoch 2 to 4 (2 adds the CurrentLeaderEpoch check
//     that kgo requires; Kafka 4 dropped 0 and 1).
var supported = map[int16]versionRange{
	kmsg.ApiVersions.Int16():     {0, 3},
	kmsg.Metadata.Int16():        {1, 12},
	kmsg.CreateTopics.Int16():    {2, 7},
	kmsg.Produce.Int16():         {0, 11},
	kmsg.Fetch.Int16():           {4, 12},
	kmsg.ListOffsets.Int16():     {1, 9},
	kmsg.InitProducerID.Int16():  {0, 4},
	kmsg.FindCoordinator.Int16(): {0, 4},

	kmsg.AddPartitionsToTxn.Int16(): {0, 3},
	kmsg.EndTxn.Int16():             {0, 4},

	kmsg.OffsetCommit.Int16():         {2, 9},
	kmsg.OffsetFetch.Int16():          {1, 9},
	kmsg.OffsetForLeaderEpoch.Int16(): {2, 4},
}

// apiVersions answers with the table above. Library: none.
func (s *Server) apiVersions(r *kmsg.ApiVersionsRequest) *kmsg.ApiVersionsResponse {
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	for key, v := range supported {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, v.min, v.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

// unsupportedApiVersions is the answer to an ApiVersions request of a
// version above ours (KIP-511): UNSUPPORTED_VERSION, read as version 0,
// with the ApiVersions versions to retry with.
func unsupportedApiVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	k := kmsg.NewApiVersionsResponseApiKey()
	v := supported[kmsg.ApiVersions.Int16()]
	k.ApiKey, k.MinVersion, k.MaxVersion = kmsg.ApiVersions.Int16(), v.min, v.max
	resp.ApiKeys = append(resp.ApiKeys, k)
	return resp
}
