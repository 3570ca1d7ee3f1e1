/// <reference path="./interfaces/gateway-provider-guard-types.d.ts" />
/// <reference path="./interfaces/gateway-provider-kv.d.ts" />
/// <reference path="./interfaces/gateway-provider-log.d.ts" />
/// <reference path="./interfaces/gateway-provider-types.d.ts" />
declare module 'gateway:provider/guard@0.2.0' {
  export type PluginInfo = import('gateway:provider/types@0.2.0').PluginInfo;
  export type Completion = import('gateway:provider/types@0.2.0').Completion;
  export type CheckedRequest = import('gateway:provider/guard-types@0.2.0').CheckedRequest;
  export type RequestVerdict = import('gateway:provider/guard-types@0.2.0').RequestVerdict;
  export type AnswerVerdict = import('gateway:provider/guard-types@0.2.0').AnswerVerdict;
  export type * as GatewayProviderGuardTypes020 from 'gateway:provider/guard-types@0.2.0'; // import gateway:provider/guard-types@0.2.0
  export type * as GatewayProviderKv020 from 'gateway:provider/kv@0.2.0'; // import gateway:provider/kv@0.2.0
  export type * as GatewayProviderLog020 from 'gateway:provider/log@0.2.0'; // import gateway:provider/log@0.2.0
  export type * as GatewayProviderTypes020 from 'gateway:provider/types@0.2.0'; // import gateway:provider/types@0.2.0
  /**
  * Its name and version (`models` is empty).
  */
  export function info(): PluginInfo;
  export function checkRequest(request: CheckedRequest): RequestVerdict;
  /**
  * `answer` is the whole answer (for a stream, once it has ended).
  */
  export function checkResponse(request: CheckedRequest, answer: Completion): AnswerVerdict;
}
