/**
 * What operator commands stand on: the database HUB_DB names and the repositories over it, each
 * group taking only those it uses. Never the server, the ingress, the sender, the dispatcher or the
 * sandbox's simulator (nor the PostgreSQL listener or the metrics, which only a serving hub needs).
 */
import { Layer } from "effect"
import { TokensRepoLive } from "../ApiTokens/Repo.js"
import { InstancesRepoLive } from "../Instances/Repo.js"
import { ThroughputRepo } from "../PhoneNumbers/ThroughputRepo.js"
import { SqlLive } from "../Sql/Client.js"
import { SecretCipher } from "../Sql/SecretCipher.js"
import { UnroutedRepoLive } from "../UpstreamEvents/Unrouted.js"

/** Organizations and instances; instances' access tokens encrypted with the key for secrets at rest. */
export const InstancesOnDatabase = InstancesRepoLive.pipe(Layer.provide(SecretCipher.Default), Layer.provide(SqlLive))

/** Instances with the numbers' throughput levels as last read (their send rates). */
export const InstancesWithLevelsOnDatabase = Layer.merge(
  InstancesOnDatabase,
  ThroughputRepo.Default.pipe(Layer.provide(SqlLive))
)

/** Organizations and instances, with sessions and api tokens. */
export const TokensOnDatabase = Layer.merge(TokensRepoLive.pipe(Layer.provide(SqlLive)), InstancesOnDatabase)

/** The upstream changes kept aside. */
export const UnroutedOnDatabase = UnroutedRepoLive.pipe(Layer.provide(SqlLive))
