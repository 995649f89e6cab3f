def get_transform(output, context):
    return output.replace("o", "0")


def words(output, context):
    return len(output.split())
