declare module 'gateway:provider/http@0.2.0' {
  export function send(request: Request): Response;
  export interface Request {
    method: string,
    url: string,
    headers: Array<[string, string]>,
    body: Uint8Array,
  }
  export type HttpError = HttpErrorForbiddenHost | HttpErrorTimeout | HttpErrorTooLarge | HttpErrorTransport | HttpErrorInvalidRequest;
  /**
   * The URL's host is not one the route allows.
   */
  export interface HttpErrorForbiddenHost {
    tag: 'forbidden-host',
    val: string,
  }
  /**
   * No answer, or no next chunk, in time.
   */
  export interface HttpErrorTimeout {
    tag: 'timeout',
    val: string,
  }
  /**
   * The response is larger than the host allows.
   */
  export interface HttpErrorTooLarge {
    tag: 'too-large',
    val: bigint,
  }
  /**
   * Connection or protocol failure.
   */
  export interface HttpErrorTransport {
    tag: 'transport',
    val: string,
  }
  /**
   * The request could not be built (bad URL, header or method).
   */
  export interface HttpErrorInvalidRequest {
    tag: 'invalid-request',
    val: string,
  }
  export interface Response {
    status: number,
    headers: Array<[string, string]>,
    body: IncomingBody,
  }
  
  export class IncomingBody implements Disposable {
    /**
     * This type does not have a public constructor.
     */
    private constructor();
    /**
    * The next chunk; `none` at the end of the body.
    */
    read(): Uint8Array | undefined;
    [Symbol.dispose](): void;
  }
}
