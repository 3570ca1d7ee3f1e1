/// <reference path="./gateway-provider-types.d.ts" />
declare module 'gateway:provider/guard-types@0.2.0' {
  export type Prompt = import('gateway:provider/types@0.2.0').Prompt;
  export type FunctionDef = import('gateway:provider/types@0.2.0').FunctionDef;
  /**
   * What the request asks the model.
   */
  export type Input = InputPrompt | InputEmbedding;
  /**
   * A completion: a prompt or a conversation.
   */
  export interface InputPrompt {
    tag: 'prompt',
    val: Prompt,
  }
  /**
   * An embeddings request: its texts, in order.
   */
  export interface InputEmbedding {
    tag: 'embedding',
    val: Array<string>,
  }
  /**
   * A request as the provider plugin would receive it, without the route's keys
   * and secrets.
   */
  export interface CheckedRequest {
    /**
     * The guard's id in the config (`[guards.ID]`).
     */
    guard: string,
    /**
     * The guard's `settings` from the config, as a JSON object.
     */
    settings: string,
    /**
     * The route serving the request.
     */
    route: string,
    model: string,
    input: Input,
    functions: Array<FunctionDef>,
    /**
     * The caller's pass-through parameters, as a JSON object.
     */
    params: string,
  }
  /**
   * What a rewrite changed, counted by kind (`email`, 2). Recorded with the
   * invocation, so it never holds the text that was removed.
   */
  export interface Change {
    kind: string,
    count: number,
  }
  export interface RequestRewrite {
    /**
     * The input to send instead (a prompt for a prompt, texts for texts: the
     * same kind, and for texts the same number).
     */
    input: Input,
    changes: Array<Change>,
  }
  export interface AnswerRewrite {
    /**
     * The text of each choice to answer instead, in the choices' order (one
     * per choice).
     */
    texts: Array<string>,
    changes: Array<Change>,
  }
  export type RequestVerdict = RequestVerdictAllow | RequestVerdictDeny | RequestVerdictRewrite;
  /**
   * Send the request on unchanged.
   */
  export interface RequestVerdictAllow {
    tag: 'allow',
  }
  /**
   * Refuse it, for this reason (shown to the caller and recorded).
   */
  export interface RequestVerdictDeny {
    tag: 'deny',
    val: string,
  }
  /**
   * Send this instead.
   */
  export interface RequestVerdictRewrite {
    tag: 'rewrite',
    val: RequestRewrite,
  }
  export type AnswerVerdict = AnswerVerdictAllow | AnswerVerdictDeny | AnswerVerdictRewrite;
  export interface AnswerVerdictAllow {
    tag: 'allow',
  }
  export interface AnswerVerdictDeny {
    tag: 'deny',
    val: string,
  }
  export interface AnswerVerdictRewrite {
    tag: 'rewrite',
    val: AnswerRewrite,
  }
}
