// What the expert node and its callers share beyond the generated protocol (expert_node.proto): the
// token's metadata key, channel and server limits, element sizes, and the node's description check.
// Internal to dist/. Thread-safety: constants and pure functions. Cost: none.
#pragma once

#include <cstdint>
#include <string>

#include <grpcpp/grpcpp.h>

#include "expert_node.grpc.pb.h"
#include "zipmoe/experts/expert_provider.h"

namespace zipmoe::dist {

inline constexpr const char* kTokenMetadataKey = "zipmoe-token";

inline size_t activationBytes(ActivationType type) { return type == ActivationType::BFloat16 ? 2 : 4; }

// "UNAVAILABLE: failed to connect to all addresses" — a status in one line.
std::string describeStatus(const grpc::Status& status);

// Constant-time comparison of the token a call presents with the node's.
bool sameToken(const std::string& presented, const std::string& expected);

// A channel to `address` with the node message limit raised on both directions.
std::shared_ptr<grpc::Channel> openChannel(const std::string& address);

}  // namespace zipmoe::dist
