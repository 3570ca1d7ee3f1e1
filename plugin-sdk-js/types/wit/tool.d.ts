/// <reference path="./interfaces/gateway-provider-http.d.ts" />
/// <reference path="./interfaces/gateway-provider-kv.d.ts" />
/// <reference path="./interfaces/gateway-provider-log.d.ts" />
/// <reference path="./interfaces/gateway-provider-tool-types.d.ts" />
/// <reference path="./interfaces/gateway-provider-types.d.ts" />
declare module 'gateway:provider/tool@0.2.0' {
  export type PluginInfo = import('gateway:provider/types@0.2.0').PluginInfo;
  export type ToolDef = import('gateway:provider/tool-types@0.2.0').ToolDef;
  export type ToolContext = import('gateway:provider/tool-types@0.2.0').ToolContext;
  export type ToolResult = import('gateway:provider/tool-types@0.2.0').ToolResult;
  export type ToolError = import('gateway:provider/tool-types@0.2.0').ToolError;
  export type * as GatewayProviderHttp020 from 'gateway:provider/http@0.2.0'; // import gateway:provider/http@0.2.0
  export type * as GatewayProviderKv020 from 'gateway:provider/kv@0.2.0'; // import gateway:provider/kv@0.2.0
  export type * as GatewayProviderLog020 from 'gateway:provider/log@0.2.0'; // import gateway:provider/log@0.2.0
  export type * as GatewayProviderToolTypes020 from 'gateway:provider/tool-types@0.2.0'; // import gateway:provider/tool-types@0.2.0
  export type * as GatewayProviderTypes020 from 'gateway:provider/types@0.2.0'; // import gateway:provider/types@0.2.0
  /**
  * Its name and version (`models` is empty).
  */
  export function info(): PluginInfo;
  /**
  * Its tools. The gateway asks again when the plugin's file changes, or the
  * server's settings do.
  */
  export function listTools(context: ToolContext): Array<ToolDef>;
  /**
  * Runs tool `name` with `arguments` (a JSON object's text).
  */
  export function callTool(name: string, arguments: string, context: ToolContext): ToolResult;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
